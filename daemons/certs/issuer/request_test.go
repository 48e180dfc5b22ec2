package issuer

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/trellis-dev/trellis/internal/certsapi"
)

// requestCorpus is bodies around the agent's layout: the agent's own,
// and near misses the fast path must hand to encoding/json.
func requestCorpus() [][]byte {
	agent, _ := json.Marshal(certsapi.SignRequest{Namespace: "team-a", Name: "web-1", UID: "6f1c2a7e-0d9b-4c1e-9a53-1d2f3e4a5b6c",
		CSR: []byte("-----BEGIN CERTIFICATE REQUEST-----\nMIH...\n-----END CERTIFICATE REQUEST-----\n")})
	s := string(agent)
	return [][]byte{
		agent,
		append(append([]byte{}, agent...), '\n'),
		append(append([]byte{}, agent...), " \t\r\n"...),
		append(append([]byte{}, agent...), `{"namespace":"x"}`...), // a second value: ignored
		append(append([]byte{}, agent...), "garbage"...),
		[]byte(strings.Replace(s, `"team-a"`, `"te\"am"`, 1)),
		[]byte(strings.Replace(s, `"team-a"`, `"te\u0041m"`, 1)),
		[]byte(strings.Replace(s, `"team-a"`, `"té"`, 1)),
		[]byte(strings.Replace(s, `"team-a"`, "\"t\xffa\"", 1)),
		[]byte(strings.Replace(s, `"team-a"`, `""`, 1)),
		[]byte(strings.Replace(s, `"web-1"`, `null`, 1)),
		[]byte(strings.Replace(s, `"namespace"`, `"Namespace"`, 1)),
		[]byte(strings.Replace(s, `{"namespace"`, `{ "namespace"`, 1)),
		[]byte(strings.Replace(s, `"csr":"`, `"csr":"!`, 1)),
		[]byte(strings.Replace(s, `"csr":"`, `"csr":"A`, 1)),
		[]byte(strings.Replace(s, `"csr":"`, `"csr":"\/`, 1)),
		[]byte(strings.Replace(s, `"csr":"`, `"csr":"=`, 1)),
		[]byte(strings.Replace(s, `"}`, `","extra":1}`, 1)),
		[]byte(strings.Replace(s, `"}`, `"`, 1)),
		[]byte(`{"namespace":"a","name":"b","uid":"c","csr":""}`),
		[]byte(`{"namespace":"a","name":"b","uid":"c","csr":"QUJD"}`),
		[]byte(`{"namespace":"a","name":"b","uid":"c","csr":"QUI="}`),
		[]byte(`{"namespace":"a","name":"b","uid":"c","csr":"QUI"}`),
		[]byte(`{"namespace":"a","name":"b","uid":"c","csr":"QUJD"`),
		[]byte(`{"uid":"c","namespace":"a","name":"b","csr":"QUJD"}`),
		[]byte(`{}`),
		[]byte(``),
		[]byte(`[]`),
	}
}

// checkDecode fails t when decodeSignRequest and encoding/json disagree
// on body, and reports whether the fast path took it.
func checkDecode(t *testing.T, body []byte) bool {
	t.Helper()
	var got, want certsapi.SignRequest
	gotErr := decodeSignRequest(body, &got)
	wantErr := json.NewDecoder(bytes.NewReader(body)).Decode(&want)
	if (gotErr == nil) != (wantErr == nil) || (gotErr != nil && gotErr.Error() != wantErr.Error()) {
		t.Fatalf("body %q: error %v, encoding/json's %v", body, gotErr, wantErr)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("body %q: decoded %+v, encoding/json's %+v", body, got, want)
	}
	var fast certsapi.SignRequest
	return decodeAgentRequest(body, &fast)
}

// TestDecodeSignRequestMatchesJSON: the issuer's reading of a sign request
// is encoding/json's, for the agent's body and its near misses; the fast
// path takes the agent's body.
func TestDecodeSignRequestMatchesJSON(t *testing.T) {
	fast := 0
	for _, body := range requestCorpus() {
		if checkDecode(t, body) {
			fast++
		}
	}
	if fast < 5 {
		t.Fatalf("the fast path decoded %d bodies; the agent's own and its whitespace and trailer variants are 5", fast)
	}
	t.Logf("%d bodies, %d by the fast path, all equal to encoding/json's", len(requestCorpus()), fast)
}

func FuzzDecodeSignRequest(f *testing.F) {
	for _, body := range requestCorpus() {
		f.Add(body)
	}
	f.Fuzz(func(t *testing.T, body []byte) { checkDecode(t, body) })
}

// TestReadSignRequestLimit: a body over the limit is refused, whatever its
// first value, and one at the limit is read.
func TestReadSignRequestLimit(t *testing.T) {
	body, _ := json.Marshal(certsapi.SignRequest{Namespace: "a", Name: "b", UID: "c", CSR: []byte("pem")})
	for _, tc := range []struct {
		pad  int
		fail bool
	}{{maxRequest - len(body), false}, {maxRequest - len(body) + 1, true}} {
		r, _ := http.NewRequest(http.MethodPost, "/", io.MultiReader(bytes.NewReader(body), strings.NewReader(strings.Repeat(" ", tc.pad))))
		var req certsapi.SignRequest
		err := readSignRequest(r, &req)
		if tc.fail != (err != nil) {
			t.Fatalf("%d bytes: error %v", len(body)+tc.pad, err)
		}
		if !tc.fail && req.Name != "b" {
			t.Fatalf("%d bytes: decoded %+v", len(body)+tc.pad, req)
		}
		if tc.fail && !strings.Contains(fmt.Sprint(err), "too large") {
			t.Fatalf("%d bytes: error %v, want http.MaxBytesReader's", len(body)+tc.pad, err)
		}
	}
}
