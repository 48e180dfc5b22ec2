package addons_test

import (
	"bytes"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/trellis-dev/trellis/addons"
	"github.com/trellis-dev/trellis/bootstrap/definition"
	karmadaaddon "github.com/trellis-dev/trellis/fleet/karmada/addon"
	"github.com/trellis-dev/trellis/internal/testutil/golden"
)

// The bundle's golden files are rendered with the bundle's lifecycles, as
// its builders (cli, local) pass them: an external test, since the
// lifecycles import this package.

// TestRenderGolden renders every cluster's bundle: the same templates for
// kind and AWS, only the values differ. CRD bodies are config/crd's own
// golden-checked files, so they are listed by name here. local-fleet is
// what `trellis local up --fleet` renders: the fleet's API with one
// member.
func TestRenderGolden(t *testing.T) {
	for _, name := range []string{"local", "local-fleet", "prod-us-east-1", "staging-us-west-2", "fleet-us-east-1"} {
		t.Run(name, func(t *testing.T) {
			l, err := definition.Load(filepath.Join("../clusters", strings.TrimSuffix(name, "-fleet")+".yaml"))
			if err != nil {
				t.Fatal(err)
			}
			def := l.ClusterDefinition
			if strings.HasSuffix(name, "-fleet") {
				def.Addons = append(def.Addons, definition.Addon{Name: karmadaaddon.KarmadaAPIServerAddon}, definition.Addon{Name: karmadaaddon.KarmadaAddon})
			}
			rendered, err := addons.Render(def, karmadaaddon.Lifecycle{})
			if err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			for _, r := range rendered {
				fmt.Fprintf(&out, "# addon %s %s\n", r.Addon.Name, r.Addon.Version)
				for _, o := range r.Objects {
					if o.GetKind() == "CustomResourceDefinition" {
						fmt.Fprintf(&out, "# CustomResourceDefinition %s (config/crd)\n", o.GetName())
						continue
					}
					b, err := yaml.Marshal(o.Object)
					if err != nil {
						t.Fatal(err)
					}
					out.WriteString("---\n")
					out.Write(b)
				}
			}
			golden.Assert(t, filepath.Join("../clusters/expected", name+".addons.yaml"), out.Bytes())
		})
	}
}
