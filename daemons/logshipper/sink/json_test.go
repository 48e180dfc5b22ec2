package sink

import (
	"encoding/json"
	"testing"
	"time"
)

func TestAppendJSONMatchesEncodingJSON(t *testing.T) {
	for _, r := range []Record{
		{Time: time.Date(2026, 11, 22, 5, 0, 0, 123456789, time.UTC), Stream: "stdout", Log: "hello", Namespace: "shop", Pod: "web-1", Container: "app", UID: "u1"},
		{Time: time.Date(2026, 11, 22, 5, 0, 0, 0, time.UTC), Stream: "unknown", Log: "\x00\x01\xff\xfe bin \"q\" \\ <a>&b \t\n\r\b\f \u2028\u2029 é 日本", Malformed: true, Truncated: true,
			Node: "n", Service: "web", Env: "prod", Workload: &Workload{Kind: "Deployment", Name: "web<1>"}, Labels: map[string]string{"b": "2", "a": "1<"}},
		{Time: time.Date(2026, 11, 28, 1, 0, 0, 0, time.UTC), Log: "lost", Namespace: "shop", Gap: &Gap{File: "/var/log/pods/a/b/0.log.1 <x>", Inode: 42, From: 10, To: 20, Bytes: 10, Reason: "gone"}},
		{},
	} {
		want, err := json.Marshal(&r)
		if err != nil {
			t.Fatal(err)
		}
		if got := r.AppendJSON(nil); string(got) != string(want) {
			t.Errorf("AppendJSON:\n got %s\nwant %s", got, want)
		}
	}
}

func FuzzAppendJSON(f *testing.F) {
	f.Add("hello \x00 \xff <>&")
	f.Fuzz(func(t *testing.T, s string) {
		r := Record{Log: s, Stream: s, Labels: map[string]string{s: s}}
		want, _ := json.Marshal(&r)
		if got := r.AppendJSON(nil); string(got) != string(want) {
			t.Fatalf("AppendJSON(%q):\n got %s\nwant %s", s, got, want)
		}
	})
}

func BenchmarkAppendJSON(b *testing.B) {
	r := Record{Time: time.Now(), Stream: "stdout", Log: "GET /api/v1/items/1 200 12ms user=42 xxxxxxxxxxxxxxxxxxxxxxxx", Namespace: "shop", Pod: "web-1", Container: "app", UID: "u1", Node: "n"}
	var buf []byte
	for b.Loop() {
		buf = r.AppendJSON(buf[:0])
	}
}
