package issuer

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"

	"github.com/trellis-dev/trellis/internal/certsapi"
)

// chainPEM is the leaf's PEM followed by the signing chain's, in one
// buffer.
func (a *authority) chainPEM(leaf []byte) []byte {
	var b bytes.Buffer
	b.Grow(2*len(leaf) + 64 + len(a.chain)) // PEM is 4/3 of the DER plus line breaks and armour
	_ = pem.Encode(&b, &pem.Block{Type: "CERTIFICATE", Bytes: leaf})
	b.Write(a.chain)
	return b.Bytes()
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
