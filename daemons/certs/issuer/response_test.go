package issuer

import (
	"bytes"
	"encoding/json"
	"encoding/pem"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes/fake"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/trellis-dev/trellis/internal/certsapi"
)

// TestEncodeSignResponseMatchesJSON: the response the issuer writes by
// hand is what encoding/json writes for the same SignResponse, and the
// leaf's PEM is encoding/pem's, for DER lengths across the line width up
// to a leaf's size, with the pooled PEM buffer reused between cases.
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
			if !bytes.Equal(got, want.Bytes()) {
				t.Fatalf("%d bytes, ID %s: response\n%s\nwant\n%s", size, id, got, want.Bytes())
			}
			n++
		}
	}
	t.Logf("%d responses equal to encoding/json's", n)
}
