package local

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"

	"github.com/trellis-dev/trellis/gateway/client"
	"github.com/trellis-dev/trellis/internal/testutil/golden"
)

// TestGatewayContextRoundTrips renders the local context file and loads
// it back as `trellis submit` does: the CA and token resolve beside it.
func TestGatewayContextRoundTrips(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	f := ContextFiles(filepath.Join(dir, "context.yaml"), "local")
	if err := GatewayContext("172.18.0.2", f).Save(f.Context); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(f.Context)
	if err != nil {
		t.Fatal(err)
	}
	golden.Assert(t, "testdata/gateway/context.yaml", b)
	got, err := client.LoadContext(f.Context)
	if err != nil {
		t.Fatal(err)
	}
	want := &client.Context{
		Server:               "https://172.18.0.2:30443",
		CertificateAuthority: filepath.Join(dir, "local-gateway-ca.pem"),
		ServerName:           "trellis-gateway.trellis-system.svc.cluster.local",
		Namespace:            "default",
		TokenFile:            filepath.Join(dir, "local-trellis-dev.token"),
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("loaded context (-want +got):\n%s", d)
	}
	if GatewayContext("fc00::2", f).Server != "https://[fc00::2]:30443" {
		t.Errorf("an IPv6 node address is not bracketed")
	}
}

// TestGatewayLocalObjects pins the NodePort Service and the dev identity's
// RBAC (create and read the workload kinds in the sample namespace only).
func TestGatewayLocalObjects(t *testing.T) {
	t.Parallel()
	sa, role, rb := DevRBAC(SampleNamespace)
	var out []byte
	for _, o := range []any{GatewayService(), sa, role, rb} {
		b, err := yaml.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		out = append(append(out, "---\n"...), b...)
	}
	golden.Assert(t, "testdata/gateway/objects.yaml", out)
}
