package render

import (
	"testing"

	"github.com/trellis-dev/trellis/bootstrap/definition"
)

// BenchmarkLoadRenderValidate measures the offline path of `trellis cluster
// render` for the largest shipped definition: load with bases, render to
// kops objects, run kops validation and serialise.
func BenchmarkLoadRenderValidate(b *testing.B) {
	for b.Loop() {
		l, err := definition.Load("../../clusters/prod-us-east-1.yaml")
		if err != nil {
			b.Fatal(err)
		}
		s, err := ToKops(l.ClusterDefinition)
		if err != nil {
			b.Fatal(err)
		}
		if err := Validate(s, false, nil); err != nil {
			b.Fatal(err)
		}
		if _, err := s.YAML(); err != nil {
			b.Fatal(err)
		}
	}
}
