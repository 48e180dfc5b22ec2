package issuer

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"

	"github.com/trellis-dev/trellis/internal/certsapi"
)

// maxRequest is the largest sign request body the issuer reads.
const maxRequest = 64 << 10

// bodies are the buffers request bodies are read into: nothing decoded
// from a body keeps a reference to it.
var bodies = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// readSignRequest reads and decodes r's body as json.Decoder.Decode does
// (the first JSON value; what follows it is ignored), refusing a body over
// maxRequest bytes. Unlike a streaming decoder it reads the body to its
// end first, so a body over the limit is refused even when its first value
// is complete, and a client that keeps its body open is bounded by the
// server's read timeout.
func readSignRequest(r *http.Request, req *certsapi.SignRequest) error {
	buf := bodies.Get().(*bytes.Buffer)
	defer func() {
		if buf.Cap() <= maxRequest+bytes.MinRead {
			buf.Reset()
			bodies.Put(buf)
		}
	}()
	buf.Reset()
	if _, err := buf.ReadFrom(http.MaxBytesReader(nil, r.Body, maxRequest)); err != nil {
		return fmt.Errorf("read the request body: %w", err)
	}
	return decodeSignRequest(buf.Bytes(), req)
}

// decodeSignRequest decodes body into req with the result
// json.NewDecoder(bytes.NewReader(body)).Decode(req) gives
// (TestDecodeSignRequestMatchesJSON, FuzzDecodeSignRequest). The body every
// agent sends, json.Marshal of a SignRequest with plain ASCII names, is
// read from its fixed layout without reflection; anything else goes to
// encoding/json.
func decodeSignRequest(body []byte, req *certsapi.SignRequest) error {
	if decodeAgentRequest(body, req) {
		return nil
	}
	return json.NewDecoder(bytes.NewReader(body)).Decode(req)
}

// decodeAgentRequest decodes body when it is laid out as json.Marshal
// writes a SignRequest whose strings need no escaping, and reports
// whether it did; req is untouched when it did not.
func decodeAgentRequest(body []byte, req *certsapi.SignRequest) bool {
	var ns, name, uid, csr []byte
	var ok bool
	b := body
	for _, f := range [...]struct {
		key string
		val *[]byte
	}{{`{"namespace":"`, &ns}, {`","name":"`, &name}, {`","uid":"`, &uid}, {`","csr":"`, &csr}} {
		if b, ok = bytes.CutPrefix(b, []byte(f.key)); !ok {
			return false
		}
		i := plainLen(b)
		*f.val, b = b[:i], b[i:]
	}
	if b, ok = bytes.CutPrefix(b, []byte(`"}`)); !ok || len(bytes.TrimLeft(b, " \t\r\n")) != 0 {
		return false
	}
	if len(ns) == 0 || len(name) == 0 || len(uid) == 0 || len(csr) == 0 {
		return false // encoding/json's empty values are not worth a path of their own
	}
	der := make([]byte, base64.StdEncoding.DecodedLen(len(csr)))
	n, err := base64.StdEncoding.Decode(der, csr)
	if err != nil {
		return false // encoding/json says what is wrong
	}
	*req = certsapi.SignRequest{Namespace: string(ns), Name: string(name), UID: string(uid), CSR: der[:n]}
	return true
}

// plainLen is how many bytes at the start of b encoding/json reads as
// themselves inside a string: printable ASCII but '"' and '\\'.
func plainLen(b []byte) int {
	for i, c := range b {
		if c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
			return i
		}
	}
	return len(b)
}
