package addons

import (
	"bytes"
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/trellis-dev/trellis/cli/internal/streams"
	"github.com/trellis-dev/trellis/internal/pki"
	"github.com/trellis-dev/trellis/internal/testutil/cluster"
)

// TestIntegrationApplyLocal: `trellis addons apply` on a local definition
// seeds the issuer's CA Secret with a generated root, once.
func TestIntegrationApplyLocal(t *testing.T) {
	cp := cluster.Start(t, cluster.Options{APIServerFlags: []string{"--allow-privileged=true"}})
	ctx := context.Background()
	run := func() string {
		var out, errb bytes.Buffer
		cmd := NewCommand(streams.Streams{In: strings.NewReader(""), Out: &out, Err: &errb})
		cmd.SetArgs([]string{"apply", "-f", "../../clusters/local.yaml", "--kubeconfig", cp.Kubeconfig})
		if err := cmd.ExecuteContext(ctx); err != nil {
			t.Fatalf("apply: %v\n%s%s", err, out.String(), errb.String())
		}
		return out.String()
	}
	out := run()
	if !strings.Contains(out, "applied trellis-controller") {
		t.Errorf("first apply:\n%s", out)
	}
	s, err := cp.Client.CoreV1().Secrets("trellis-system").Get(ctx, "trellis-ca", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	st, err := pki.Load(s.Data)
	if err != nil {
		t.Fatalf("the seeded CA does not load: %v", err)
	}
	if _, ok := s.Data["root-key.pem"]; ok {
		t.Error("the CA Secret carries a root key")
	}
	out = run()
	if !strings.Contains(out, "unchanged trellis-controller") {
		t.Errorf("second apply:\n%s", out)
	}
	s2, _ := cp.Client.CoreV1().Secrets("trellis-system").Get(ctx, "trellis-ca", metav1.GetOptions{})
	if st2, err := pki.Load(s2.Data); err != nil || !st2.Equal(st) {
		t.Error("a second apply replaced the CA (rotation must be deliberate)")
	}
}
