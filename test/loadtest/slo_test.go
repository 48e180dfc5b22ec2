package loadtest

import (
	"bytes"
	"os"
	"testing"
	"time"
)

func TestSLIWindow(t *testing.T) {
	read := func(name string) SLISnapshot {
		t.Helper()
		f, err := os.Open("testdata/" + name)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		s, err := parseSLI(f)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	w := Window(read("sli-before.txt"), read("sli-after.txt"))
	want := SLIWindow{
		// 98 fast, 2 between 1.25 and 1.5s: the 99th is in the 1.5s bucket.
		{Key: "patch nodes/status", Count: 100, P99: 1500 * time.Millisecond},
		{Key: "delete pods", Count: 3, P99: 200 * time.Millisecond},
		// 99 fast, 1 slow: the 99th is still fast.
		{Key: "create pods", Count: 100, P99: 50 * time.Millisecond},
	}
	if len(w) != len(want) {
		t.Fatalf("window = %+v, want %+v (reads like LIST are not in the SLO)", w, want)
	}
	for i := range want {
		if w[i] != want[i] {
			t.Errorf("window[%d] = %+v, want %+v", i, w[i], want[i])
		}
	}
	if w.Met(10) {
		t.Errorf("Met(10) = true with patch nodes/status at p99 1.5s")
	}
	if !w[1:].Met(1) {
		t.Errorf("Met(1) = false without patch nodes/status")
	}
	var b bytes.Buffer
	w.Print(&b, 1, 10)
	if got := b.String(); got != "    patch nodes/status                          100 calls  p99 <= 1.5s\n" {
		t.Errorf("Print = %q", got)
	}
}

func TestClientName(t *testing.T) {
	for ua, want := range map[string]string{
		"kube-controller-manager/v1.36.3 (linux/amd64) kubernetes/abc/system:serviceaccount:kube-system:deployment-controller": "kube-controller-manager:deployment-controller",
		"trellis-controller": "trellis-controller",
		"kwok/v0.8.0":        "kwok",
	} {
		if got := ClientName(ua); got != want {
			t.Errorf("ClientName(%q) = %q, want %q", ua, got, want)
		}
	}
}
