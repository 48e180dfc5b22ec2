package trellisservice

import (
	"bytes"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/trellis-dev/trellis/api/v1alpha1"
	"github.com/trellis-dev/trellis/api/wellknown"
	"github.com/trellis-dev/trellis/controller/inject"
	"github.com/trellis-dev/trellis/internal/testutil/gen"
	"github.com/trellis-dev/trellis/internal/testutil/golden"
)

func profile() *inject.Profile {
	p := inject.DefaultProfile()
	p.Revision = "r1"
	p.Cluster = "prod-us-east-1"
	p.Env = "prod"
	return p
}

func TestTranslateGolden(t *testing.T) {
	cases := map[string]*v1alpha1.TrellisService{
		"minimal":    gen.Service("web"),
		"full":       gen.Service("api", gen.WithReplicas(6), gen.WithConfig(map[string]string{"app.yaml": "greeting: hello\n"}), gen.WithIngress("api.example.com"), gen.WithLabels(map[string]string{wellknown.LabelTeam: "payments", wellknown.LabelCostCenter: "cc-42"})),
		"defaulted":  gen.Service("batchy", gen.WithBareContainer("helper")),
		"no-runtime": gen.Service("plain", gen.WithoutDiscovery(), gen.WithoutIdentity()),
	}
	for name, ts := range cases {
		t.Run(name, func(t *testing.T) {
			objs, err := Translate(ts, profile())
			if err != nil {
				t.Fatal(err)
			}
			golden.AssertObjects(t, filepath.Join("testdata", name+".golden.yaml"), objs)
		})
	}
}

func TestTranslateRequiresResources(t *testing.T) {
	p := profile()
	p.Resources.Policy = inject.PolicyRequire
	_, err := Translate(gen.Service("web", gen.WithBareContainer("helper")), p)
	if !errors.Is(err, inject.ErrResourcesRequired) || !strings.Contains(err.Error(), `container "helper"`) {
		t.Fatalf("want ErrResourcesRequired naming helper, got %v", err)
	}
	if _, err := Translate(gen.Service("web"), p); err != nil {
		t.Fatalf("containers with resources: %v", err)
	}
}

func TestTranslateIsDeterministic(t *testing.T) {
	ts := gen.Service("api", gen.WithConfig(map[string]string{"a": "1", "b": "2"}), gen.WithIngress("x.example.com"))
	a, _ := Translate(ts, profile())
	b, _ := Translate(ts, profile())
	ya, _ := yaml.Marshal(a)
	yb, _ := yaml.Marshal(b)
	if !bytes.Equal(ya, yb) {
		t.Fatal("Translate is not deterministic")
	}
}
