package kube

import (
	"fmt"
	"io"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// PrintYAML writes objects as a YAML stream, each document after "---",
// as kubectl apply -f takes it.
func PrintYAML(w io.Writer, objs ...*unstructured.Unstructured) error {
	for _, o := range objs {
		b, err := yaml.Marshal(o.Object)
		if err != nil {
			return fmt.Errorf("%s %s: %w", o.GetKind(), o.GetName(), err)
		}
		fmt.Fprintf(w, "---\n%s", b)
	}
	return nil
}
