package issuer

import (
	"bytes"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes/fake"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/trellis-dev/trellis/internal/certsapi"
)

// TestEncodeSignResponseMatchesJSON: the response the issuer writes by
// hand is what encoding/json writes for the same SignResponse, and the
// leaf's PEM is encoding/pem's, for DER lengths across the line width up
// to a leaf's size, with the pooled buffers reused between cases.
func TestEncodeSignResponseMatchesJSON(t *testing.T) {
	is := newIssuer(t, clocktesting.NewFakeClock(time.Now()), fake.NewClientset())
	a := is.state.Load()
	n := 0
	for size := range 1200 { // up to a leaf's size, across PEM's line width
		der := bytes.Repeat([]byte{byte(size)}, size)
		if got, want := a.chainPEM(der), append(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), a.chain...); !bytes.Equal(got, want) {
			t.Fatalf("%d bytes: chain\n%s\nwant\n%s", size, got, want)
		}
		for _, id := range []string{"spiffe://trellis.test/ns/a/sa/b", `spiffe://trellis.test/ns/<&>/sa/"q"`} {
			resp := &certsapi.SignResponse{Chain: a.chainPEM(der), Bundle: a.bundle, SPIFFEID: id}
			got, err := a.encodeSignResponse(der, id)
			if err != nil {
				t.Fatal(err)
			}
			var want bytes.Buffer
			if err := json.NewEncoder(&want).Encode(resp); err != nil {
				t.Fatal(err)
			}
			var sent bytes.Buffer
			writeResponse(&sent, got) // back to the pool: the next case reuses it
			if !bytes.Equal(sent.Bytes(), want.Bytes()) {
				t.Fatalf("%d bytes, ID %s: response\n%s\nwant\n%s", size, id, sent.Bytes(), want.Bytes())
			}
			n++
		}
	}
	t.Logf("%d responses equal to encoding/json's", n)
}

// keptWriter fails every write and keeps the slice it was given, as
// net/http's HTTP/2 writer may when the client reset the stream.
type keptWriter struct{ kept [][]byte }

func (w *keptWriter) Write(p []byte) (int, error) {
	w.kept = append(w.kept, p)
	return 0, errors.New("stream closed")
}

// TestWriteResponseKeepsFailedBuffers: a response whose write failed is
// never handed out again, so a writer still reading it sees its bytes.
func TestWriteResponseKeepsFailedBuffers(t *testing.T) {
	is := newIssuer(t, clocktesting.NewFakeClock(time.Now()), fake.NewClientset())
	a := is.state.Load()
	failed, err := a.encodeSignResponse([]byte("leaf one"), "spiffe://trellis.test/ns/a/sa/b")
	if err != nil {
		t.Fatal(err)
	}
	want := string(*failed)
	kw := &keptWriter{}
	writeResponse(kw, failed)
	for range 1000 {
		b, err := a.encodeSignResponse([]byte("leaf two, longer"), "spiffe://trellis.test/ns/c/sa/d")
		if err != nil {
			t.Fatal(err)
		}
		if b == failed {
			t.Fatal("a buffer whose write failed was handed out again")
		}
		writeResponse(io.Discard, b)
	}
	if got := string(kw.kept[0]); got != want {
		t.Fatalf("the failed write's bytes changed under the writer:\n%s\nwant\n%s", got, want)
	}
}
