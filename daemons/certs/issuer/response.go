package issuer

import (
	"encoding/base64"
	"encoding/json"
	"fmt"

	"github.com/trellis-dev/trellis/internal/certsapi"
)

// The PEM armour of a certificate.
const (
	pemBegin = "-----BEGIN CERTIFICATE-----\n"
	pemEnd   = "-----END CERTIFICATE-----\n"
)

// appendPEM appends der as a PEM CERTIFICATE block, as encoding/pem writes
// it: base64 in lines of 64 characters.
func appendPEM(buf, der []byte) []byte {
	buf = append(buf, pemBegin...)
	enc := base64.StdEncoding
	for len(der) > 0 {
		n := min(len(der), 48) // 48 bytes are 64 characters
		buf = enc.AppendEncode(buf, der[:n])
		buf = append(buf, '\n')
		der = der[n:]
	}
	return append(buf, pemEnd...)
}

// pemLen is the length appendPEM adds for der.
func pemLen(der []byte) int {
	lines := (len(der) + 47) / 48
	return len(pemBegin) + base64.StdEncoding.EncodedLen(len(der)) + lines + len(pemEnd)
}

// chainPEM is the leaf's PEM followed by the signing chain's.
func (a *authority) chainPEM(leaf []byte) []byte {
	out := make([]byte, 0, pemLen(leaf)+len(a.chain))
	return append(appendPEM(out, leaf), a.chain...)
}

// encodeSignResponse is what json.Encoder writes for resp, whose bundle is
// a's: the bundle's base64 is encoded once per CA rotation, not once per
// certificate (TestEncodeSignResponseMatchesJSON).
func (a *authority) encodeSignResponse(resp *certsapi.SignResponse) ([]byte, error) {
	id, err := json.Marshal(resp.SPIFFEID)
	if err != nil {
		return nil, fmt.Errorf("failed to encode the SPIFFE ID: %w", err)
	}
	enc := base64.StdEncoding
	out := make([]byte, 0, 40+enc.EncodedLen(len(resp.Chain))+len(a.bundleB64)+len(id))
	out = append(out, `{"chain":"`...)
	out = enc.AppendEncode(out, resp.Chain)
	out = append(out, `","bundle":"`...)
	out = append(out, a.bundleB64...)
	out = append(out, `","spiffeID":`...)
	out = append(out, id...)
	return append(out, "}\n"...), nil
}
