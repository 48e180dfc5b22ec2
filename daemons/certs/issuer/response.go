package issuer

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"sync"
)

// chainPEM is the leaf's PEM followed by the signing chain's, in one
// buffer.
func (a *authority) chainPEM(leaf []byte) []byte {
	return a.appendChainPEM(make([]byte, 0, pemLen(len(leaf))+len(a.chain)), leaf)
}

// appendChainPEM appends the leaf's PEM, as encoding/pem writes a
// CERTIFICATE block without headers, and the signing chain's.
func (a *authority) appendChainPEM(b, leaf []byte) []byte {
	b = append(b, "-----BEGIN CERTIFICATE-----\n"...)
	for len(leaf) > 0 {
		n := min(len(leaf), pemLineBytes)
		b = base64.StdEncoding.AppendEncode(b, leaf[:n])
		b = append(b, '\n')
		leaf = leaf[n:]
	}
	b = append(b, "-----END CERTIFICATE-----\n"...)
	return append(b, a.chain...)
}

// pemLineBytes is the DER bytes on one PEM line of 64 characters.
const pemLineBytes = 48

// pemLen is the length of a CERTIFICATE block of n DER bytes.
func pemLen(n int) int {
	return len("-----BEGIN CERTIFICATE-----\n-----END CERTIFICATE-----\n") + base64.StdEncoding.EncodedLen(n) + (n+pemLineBytes-1)/pemLineBytes
}

// buffers are the slices sign responses, and the chains' PEM on their
// way into them, are written into: a response is a few kilobytes, most of
// what a request would otherwise allocate.
var buffers = sync.Pool{New: func() any { b := make([]byte, 0, 4<<10); return &b }}

// putBuffer gives b back to the pool, unless it grew past what a response
// needs.
func putBuffer(b *[]byte) {
	if cap(*b) <= 64<<10 {
		*b = (*b)[:0]
		buffers.Put(b)
	}
}

// writeResponse writes a buffer encodeSignResponse returned, and gives it
// back to the pool only when the write took all of it without an error.
// Over HTTP/2, net/http's Write returns an error while its frame writer may
// still be copying the slice, when the client reset the stream or went
// away; such a buffer is left to the garbage collector.
func writeResponse(w io.Writer, b *[]byte) {
	if n, err := w.Write(*b); err == nil && n == len(*b) {
		putBuffer(b)
	}
}

// encodeSignResponse is what json.Encoder writes for the SignResponse of
// leaf with SPIFFE ID id, whose bundle is a's: the bundle's base64 is
// encoded once per CA rotation, not once per certificate
// (TestEncodeSignResponseMatchesJSON). The caller writes it with
// writeResponse.
func (a *authority) encodeSignResponse(leaf []byte, id string) (*[]byte, error) {
	idJSON, err := json.Marshal(id)
	if err != nil {
		return nil, fmt.Errorf("failed to encode the SPIFFE ID: %w", err)
	}
	chain := buffers.Get().(*[]byte)
	defer putBuffer(chain)
	*chain = a.appendChainPEM((*chain)[:0], leaf)
	enc := base64.StdEncoding
	out := buffers.Get().(*[]byte)
	b := slices.Grow((*out)[:0], 40+enc.EncodedLen(len(*chain))+len(a.bundleB64)+len(idJSON))
	b = append(b, `{"chain":"`...)
	b = enc.AppendEncode(b, *chain)
	b = append(b, `","bundle":"`...)
	b = append(b, a.bundleB64...)
	b = append(b, `","spiffeID":`...)
	b = append(b, idJSON...)
	*out = append(b, "}\n"...)
	return out, nil
}
