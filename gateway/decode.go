package gateway

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	"github.com/trellis-dev/trellis/api/v1alpha1"
	"github.com/trellis-dev/trellis/gateway/api"
)

// Submission is a decoded workload.
type Submission struct {
	kind workloadKind
	// Obj is the typed workload.
	Obj client.Object
	// Raw is the document as written (JSON object), what is applied.
	Raw map[string]any
	// Canonical is api.Canonical of the body; Digest its SHA-256.
	Canonical []byte
	Digest    string
}

// Kind is the workload's kind.
func (s *Submission) Kind() string { return s.kind.Kind }

// Decode reads one workload of the six kinds from YAML or JSON, strictly:
// unknown and repeated fields are problems with their paths, as are a
// missing name or namespace, another API version, an unknown kind, or a
// second document. It never panics (FuzzDecode).
func Decode(body []byte) (*Submission, []api.Problem) {
	bad := func(field, format string, args ...any) []api.Problem {
		return []api.Problem{{Check: "decode", Field: field, Message: fmt.Sprintf(format, args...)}}
	}
	if len(body) > api.MaxBody {
		return nil, bad("", "the body is %d bytes, more than the limit of %d", len(body), api.MaxBody)
	}
	docs := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(body), 4096)
	var first json.RawMessage
	if err := docs.Decode(&first); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, bad("", "the body is empty: want one workload")
		}
		return nil, bad("", "malformed YAML or JSON: %v", err)
	}
	var second json.RawMessage
	if err := docs.Decode(&second); err == nil && len(bytes.TrimSpace(second)) > 0 && string(second) != "null" {
		return nil, bad("", "the body holds more than one document: submit one workload at a time")
	} else if err != nil && !errors.Is(err, io.EOF) {
		return nil, bad("", "malformed YAML or JSON after the first document: %v", err)
	}
	// Strict YAML (repeated keys) on the document as written.
	if _, err := yaml.YAMLToJSONStrict(body); err != nil && !json.Valid(body) {
		return nil, bad("", "malformed YAML: %v", err)
	}
	var raw map[string]any
	if err := json.Unmarshal(first, &raw); err != nil || raw == nil {
		return nil, bad("", "the document is not an object: want a workload with apiVersion, kind, metadata and spec")
	}
	var probs []api.Problem
	if av, _ := raw["apiVersion"].(string); av != v1alpha1.GroupVersion.String() {
		probs = append(probs, api.Problem{Check: "decode", Field: "apiVersion", Message: fmt.Sprintf("apiVersion %q: want %s", av, v1alpha1.GroupVersion)})
	}
	kn, _ := raw["kind"].(string)
	k, ok := kindByName(kn)
	if !ok || k.Kind != kn {
		return nil, append(probs, api.Problem{Check: "decode", Field: "kind", Message: fmt.Sprintf("unknown kind %q: want one of %s", kn, strings.Join(kindNames(), ", "))})
	}
	obj := k.New()
	strict, err := sigsjson.UnmarshalStrict(first, obj)
	if err != nil {
		return nil, append(probs, api.Problem{Check: "decode", Message: err.Error()})
	}
	for _, e := range strict {
		probs = append(probs, api.Problem{Check: "decode", Field: strictField(e.Error()), Message: e.Error()})
	}
	if obj.GetName() == "" {
		probs = append(probs, api.Problem{Check: "decode", Field: "metadata.name", Message: "metadata.name is required"})
	}
	if obj.GetNamespace() == "" {
		probs = append(probs, api.Problem{Check: "decode", Field: "metadata.namespace", Message: "metadata.namespace is required"})
	}
	if obj.GetGenerateName() != "" {
		probs = append(probs, api.Problem{Check: "decode", Field: "metadata.generateName", Message: "generateName is not supported: name the workload"})
	}
	if len(probs) > 0 {
		return nil, probs
	}
	canon, err := json.Marshal(raw)
	if err != nil {
		return nil, bad("", "failed to encode the canonical workload: %v", err)
	}
	sum := sha256.Sum256(canon)
	return &Submission{kind: k, Obj: obj, Raw: raw, Canonical: canon, Digest: hex.EncodeToString(sum[:])}, nil
}

// strictField takes the path out of sigs.k8s.io/json's strict errors
// (`unknown field "spec.foo"`, `duplicate field "spec.foo"`).
func strictField(msg string) string {
	i := strings.Index(msg, `"`)
	j := strings.LastIndex(msg, `"`)
	if i < 0 || j <= i {
		return ""
	}
	return msg[i+1 : j]
}
