package render

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/trellis-dev/trellis/bootstrap/definition"
	"github.com/trellis-dev/trellis/internal/testutil/golden"
)

// TestRenderClusters renders every definition in clusters/ and compares it
// with clusters/expected/<name>.kops.yaml (aws) or <name>.kind.yaml (kind).
func TestRenderClusters(t *testing.T) {
	files, err := filepath.Glob("../../clusters/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	rendered := 0
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".yaml")
		t.Run(name, func(t *testing.T) {
			d, err := definition.Load(f)
			if err != nil {
				t.Fatal(err)
			}
			if d.Cloud == definition.CloudKind {
				kc, err := ToKind(d.ClusterDefinition, DefaultNodeImage, HostQuirks{CgroupV1: true, NoNegativeOOMScoreAdj: true})
				if err != nil {
					t.Fatal(err)
				}
				out, err := KindYAML(kc)
				if err != nil {
					t.Fatal(err)
				}
				golden.Assert(t, filepath.Join("../../clusters/expected", name+".kind.yaml"), out)
				return
			}
			rendered++
			s, err := ToKops(d.ClusterDefinition)
			if err != nil {
				t.Fatal(err)
			}
			if err := Validate(s, false, nil); err != nil {
				t.Fatalf("kops validation: %v", err)
			}
			out, err := s.YAML()
			if err != nil {
				t.Fatal(err)
			}
			golden.Assert(t, filepath.Join("../../clusters/expected", name+".kops.yaml"), out)
		})
	}
	if rendered < 2 {
		t.Fatalf("rendered %d AWS clusters, want at least 2", rendered)
	}
}

func TestCovering(t *testing.T) {
	for _, tc := range []struct{ a, b, want string }{
		{"100.96.0.0/11", "100.64.0.0/13", "100.64.0.0/10"},
		{"10.244.0.0/16", "10.96.0.0/16", "10.0.0.0/8"},
		{"10.0.0.0/16", "10.0.0.0/16", "10.0.0.0/16"},
	} {
		if got := covering(tc.a, tc.b); got != tc.want {
			t.Errorf("covering(%s, %s) = %s, want %s", tc.a, tc.b, got, tc.want)
		}
	}
}
