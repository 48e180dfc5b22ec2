package gateway

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/trellis-dev/trellis/gateway/api"
)

const goodService = `apiVersion: workloads.trellis.dev/v1alpha1
kind: TrellisService
metadata:
  name: web
  namespace: team-a
spec:
  ports: [{name: http, port: 8080}]
  template:
    containers:
    - name: web
      image: registry.example.com/web@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef
`

func TestDecode(t *testing.T) {
	for _, tc := range []struct {
		name  string
		body  string
		field string
		want  string
	}{
		{"empty", "", "", "empty"},
		{"malformed", "kind: [x", "", "malformed"},
		{"not an object", "- a\n- b\n", "", "not an object"},
		{"two documents", goodService + "---\n" + goodService, "", "more than one document"},
		{"unknown kind", strings.Replace(goodService, "TrellisService", "Pod", 1), "kind", `unknown kind "Pod"`},
		{"lower-case kind", strings.Replace(goodService, "kind: TrellisService", "kind: trellisservice", 1), "kind", "unknown kind"},
		{"other version", strings.Replace(goodService, "v1alpha1", "v1", 1), "apiVersion", "want workloads.trellis.dev/v1alpha1"},
		{"unknown field", strings.Replace(goodService, "  ports:", "  portz: 1\n  ports:", 1), "spec.portz", "unknown field"},
		{"repeated field", strings.Replace(goodService, "  ports:", "  ports: []\n  ports:", 1), "", "ports"},
		{"no namespace", strings.Replace(goodService, "  namespace: team-a\n", "", 1), "metadata.namespace", "required"},
		{"no name", strings.Replace(goodService, "  name: web\n", "", 1), "metadata.name", "required"},
		{"wrong type", strings.Replace(goodService, "  ports:", "  replicas: lots\n  ports:", 1), "", "replicas"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sub, probs := Decode([]byte(tc.body))
			if sub != nil || len(probs) == 0 {
				t.Fatalf("decoded %q", tc.body)
			}
			var msgs []string
			found := false
			for _, p := range probs {
				msgs = append(msgs, p.Field+": "+p.Message)
				if (tc.field == "" || p.Field == tc.field) && strings.Contains(p.Message, tc.want) {
					found = true
				}
			}
			if !found {
				t.Errorf("want a problem at %q saying %q, got %v", tc.field, tc.want, msgs)
			}
		})
	}
}

func TestDecodeCanonicalMatchesSigning(t *testing.T) {
	sub, probs := Decode([]byte(goodService))
	if probs != nil {
		t.Fatal(probs)
	}
	c, err := api.Canonical([]byte(goodService))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(c), string(sub.Canonical)); diff != "" {
		t.Errorf("the gateway verifies another form than clients sign (-sign +verify):\n%s", diff)
	}
	// JSON of the same workload is the same submission.
	sub2, probs := Decode(c)
	if probs != nil || sub2.Digest != sub.Digest {
		t.Errorf("JSON form: %v, digest %s vs %s", probs, sub2.Digest, sub.Digest)
	}
}

// FuzzDecode: Decode never panics; it gives a workload or problems,
// never both; a workload has a name, a namespace and one of the six
// kinds; the typed object the checks and the authorization look at names
// the same kind, namespace and name as the raw document that is applied
// (a mismatch would let a caller be authorized for one namespace and write
// to another); and the canonical form decodes to the same submission.
// `make fuzz` runs it.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{goodService, "", "kind: [", "{}", "[]", "null", "---\n---\n", `{"apiVersion":"workloads.trellis.dev/v1alpha1","kind":"TrellisJobSet","metadata":{"name":"a","namespace":"b"},"spec":{}}`,
		strings.Replace(goodService, "TrellisService", "TrellisDaemon", 1), "a: &x [*x, *x]\n", "\xff\xfe",
		// Keys that differ in case only: a case-insensitive typed decode
		// would take the second namespace, the applied document the first.
		`{"apiVersion":"workloads.trellis.dev/v1alpha1","kind":"TrellisService","metadata":{"name":"a","namespace":"team-a","Namespace":"kube-system"},"spec":{}}`,
		strings.Replace(goodService, "  namespace: team-a\n", "  namespace: team-a\n  Name: other\n", 1)} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		sub, probs := Decode(body)
		if (sub == nil) == (len(probs) == 0) {
			t.Fatalf("Decode gave %v and %d problems", sub, len(probs))
		}
		if sub == nil {
			return
		}
		if sub.Obj.GetName() == "" || sub.Obj.GetNamespace() == "" {
			t.Fatalf("decoded a workload without name or namespace")
		}
		if _, ok := kindByName(sub.Kind()); !ok {
			t.Fatalf("decoded unknown kind %q", sub.Kind())
		}
		raw := &unstructured.Unstructured{Object: sub.Raw}
		if raw.GetKind() != sub.Kind() || raw.GetNamespace() != sub.Obj.GetNamespace() || raw.GetName() != sub.Obj.GetName() {
			t.Fatalf("checked %s %s/%s but would apply %s %s/%s", sub.Kind(), sub.Obj.GetNamespace(), sub.Obj.GetName(), raw.GetKind(), raw.GetNamespace(), raw.GetName())
		}
		again, probs := Decode(sub.Canonical)
		if probs != nil {
			t.Fatalf("the canonical form of a workload is refused: %v", probs)
		}
		if again.Digest != sub.Digest {
			t.Fatalf("the canonical form has another digest: %s, was %s", again.Digest, sub.Digest)
		}
	})
}
