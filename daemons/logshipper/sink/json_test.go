package sink

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

func TestAppendJSONMatchesEncodingJSON(t *testing.T) {
	for _, r := range []Record{
		{Time: time.Date(2026, 11, 22, 5, 0, 0, 123456789, time.UTC), Stream: "stdout", Log: "hello", Identity: &Identity{Namespace: "shop", Pod: "web-1", Container: "app", UID: "u1"}},
		{Time: time.Date(2026, 11, 22, 5, 0, 0, 0, time.UTC), Stream: "unknown", Log: "\x00\x01\xff\xfe bin \"q\" \\ <a>&b \t\n\r\b\f \u2028\u2029 é 日本", Malformed: true, Truncated: true,
			Identity: &Identity{Node: "n", Service: "web", Env: "prod", Workload: &Workload{Kind: "Deployment", Name: "web<1>"}, Labels: map[string]string{"b": "2", "a": "1<"}}},
		{Time: time.Date(2026, 11, 28, 1, 0, 0, 0, time.UTC), Log: "lost", Identity: &Identity{Namespace: "shop"}, Gap: &Gap{File: "/var/log/pods/a/b/0.log.1 <x>", Inode: 42, From: 10, To: 20, Bytes: 10, Reason: "gone"}},
		{Identity: &Identity{}},
		{},
	} {
		want, err := json.Marshal(&r)
		if err != nil {
			t.Fatal(err)
		}
		if got := r.AppendJSON(nil); string(got) != string(want) {
			t.Errorf("AppendJSON:\n got %s\nwant %s", got, want)
		}
		// With the identity rendered once and reused, as the shipper does.
		if r.Identity != nil {
			r.Render()
			if got := r.AppendJSON(nil); string(got) != string(want) {
				t.Errorf("AppendJSON with the identity rendered:\n got %s\nwant %s", got, want)
			}
		}
	}
}

func FuzzAppendJSON(f *testing.F) {
	f.Add("hello \x00 \xff <>&")
	f.Fuzz(func(t *testing.T, s string) {
		r := Record{Log: s, Stream: s, Identity: &Identity{Labels: map[string]string{s: s}}}
		want, _ := json.Marshal(&r)
		if got := r.AppendJSON(nil); string(got) != string(want) {
			t.Fatalf("AppendJSON(%q):\n got %s\nwant %s", s, got, want)
		}
	})
}

func BenchmarkAppendJSON(b *testing.B) {
	r := Record{Time: time.Now().UTC(), Stream: "stdout", Log: "GET /api/v1/items/1 200 12ms user=42 xxxxxxxxxxxxxxxxxxxxxxxx", Identity: &Identity{Namespace: "shop", Pod: "web-1", Container: "app", UID: "u1", Node: "n",
		Service: "web", Env: "prod", Workload: &Workload{Kind: "Deployment", Name: "web"},
		Labels: map[string]string{"app.kubernetes.io/name": "web", "app.kubernetes.io/part-of": "shop", "app.kubernetes.io/version": "1.4.2",
			"team": "checkout", "tier": "backend", "trellis.dev/service": "web", "pod-template-hash": "7d9f8c6b5"}}}
	for _, identity := range []bool{false, true} {
		if identity {
			r.Render()
		}
		b.Run(map[bool]string{false: "per-line", true: "identity-once"}[identity], func(b *testing.B) {
			var buf []byte
			for b.Loop() {
				buf = r.AppendJSON(buf[:0])
			}
		})
	}
}

func BenchmarkAppendString(b *testing.B) {
	s := "GET /api/v1/items/12345 200 12ms user=42 " + strings.Repeat("x", 100)
	buf := make([]byte, 0, 512)
	b.SetBytes(int64(len(s)))
	for b.Loop() {
		buf = AppendString(buf[:0], s)
	}
}

// TestAppendStringWords: AppendString's eight-byte scan escapes what
// encoding/json escapes, for every byte value at every position of a word
// among plain bytes, on both sides of a word boundary, and for random
// words of bytes at the edges of the classes the scan tells apart.
func TestAppendStringWords(t *testing.T) {
	check := func(s []byte) {
		want, _ := json.Marshal(string(s))
		if got := AppendString(nil, string(s)); string(got) != string(want) {
			t.Fatalf("AppendString(%q) = %s, encoding/json %s", s, got, want)
		}
	}
	n := 0
	for _, size := range []int{8, 9, 16, 17} {
		for pos := range size {
			for c := range 256 {
				for _, fill := range []byte{'a', ' ', 0x7f, '!', '='} {
					w := bytes.Repeat([]byte{fill}, size)
					w[pos] = byte(c)
					check(w)
					n++
				}
			}
		}
	}
	rng := rand.New(rand.NewPCG(5, 6))
	edges := []byte{0x1f, 0x20, 0x21, 0x7e, 0x7f, 0x80, 0xff, '"', '\\', '<', '>', '&', '=', '?', '[', ']', 'a', 0x00}
	for range 1 << 18 {
		w := make([]byte, 8+rng.IntN(17))
		for i := range w {
			w[i] = edges[rng.IntN(len(edges))]
		}
		check(w)
		n++
	}
	t.Logf("%d strings escaped as encoding/json escapes them", n)
}
