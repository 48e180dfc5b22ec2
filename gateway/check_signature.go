package gateway

import (
	"crypto/ed25519"
	"encoding/base64"
	"fmt"
	"slices"
	"strings"

	"github.com/trellis-dev/trellis/gateway/api"
)

// checkSignature verifies header (api.HeaderSignature) over the canonical
// workload against the policy's signers. Without a header it passes
// unless the policy requires signatures; a header is always verified.
func checkSignature(canonical []byte, header string, p *Policy) (skipped bool, probs []api.Problem) {
	bad := func(format string, args ...any) []api.Problem {
		return []api.Problem{{Check: "signature", Field: "header " + api.HeaderSignature, Message: fmt.Sprintf(format, args...)}}
	}
	if header == "" {
		if p.RequireSignature {
			return false, bad("the platform requires a signed workload: sign it with a key it lists (%s)", signerNames(p))
		}
		return true, nil
	}
	name, sig64, ok := strings.Cut(header, ":")
	if !ok {
		return false, bad("want <key name>:<base64 signature>")
	}
	key, ok := p.Signers[name]
	if !ok {
		return false, bad("signer %q is not one the platform lists (%s)", name, signerNames(p))
	}
	sig, err := base64.StdEncoding.DecodeString(sig64)
	if err != nil {
		return false, bad("signature is not base64: %v", err)
	}
	if !ed25519.Verify(key, canonical, sig) {
		return false, bad("signature by %q does not match the workload: it was changed after signing, or signed with another key", name)
	}
	return false, nil
}

func signerNames(p *Policy) string {
	names := make([]string, 0, len(p.Signers))
	for n := range p.Signers {
		names = append(names, n)
	}
	slices.Sort(names)
	if len(names) == 0 {
		return "none listed"
	}
	return strings.Join(names, ", ")
}
