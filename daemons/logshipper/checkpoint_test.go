package logshipper

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/trellis-dev/trellis/internal/fsync"
)

// A checkpoint an older shipper wrote whole (JSON, by fsync.Replace) is
// resumed from as it is, and the first save turns it into a record file
// holding the same positions.
func TestCheckpointFromAnOlderShipper(t *testing.T) {
	path := filepath.Join(t.TempDir(), "checkpoint.json")
	want := map[string]Position{
		"a": {Key: "a", Seq: 1, Dir: "/var/log/pods/ns_p_u/c", Path: "0.log", Inode: 42, Offset: 1234, Size: 2000, Head: []byte("2026-11-30T10:00:00Z stdout F x")},
		"b": {Key: "b", Seq: 2, Dir: "/var/log/pods/ns_p_u/c", Path: "0.log.20261130", Inode: 41, Offset: 10, Done: true},
	}
	old, err := json.Marshal(checkpoint{Positions: []Position{want["a"], want["b"]}})
	if err != nil {
		t.Fatal(err)
	}
	if err := fsync.Replace(path, old, 0o600); err != nil {
		t.Fatal(err)
	}
	got, seq, err := loadCheckpoint(path)
	if err != nil || seq != 0 || !reflect.DeepEqual(got, want) {
		t.Fatalf("older checkpoint read as %+v at seq %d (%v), want %+v at 0", got, seq, err, want)
	}
	w := fsync.NewRecordWriter(path, 0o600, seq)
	defer w.Close()
	if err := saveCheckpoint(w, appendCheckpoint(nil, got)); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(path); bytes.HasPrefix(b, []byte("{")) {
		t.Fatal("the first save left the older format")
	}
	again, seq, err := loadCheckpoint(path)
	if err != nil || seq != 1 || !reflect.DeepEqual(again, want) {
		t.Fatalf("after the first save: %+v at seq %d (%v), want %+v at 1", again, seq, err, want)
	}
}

func TestAppendCheckpointMatchesEncodingJSON(t *testing.T) {
	strs := []string{"", "0.log", "/var/log/pods/ns_web-1_3f2a/app", "a\"b", `back\slash`, "<tag>", "a&b", "x>y", "tab\there\n",
		"ünïcode ✓", "\u2028line\u2029sep", "\x7f", "bad utf-8 \xff\xfe", "nul\x00"}
	rng := rand.New(rand.NewPCG(1, 2))
	all := map[string]Position{}
	for i := range 500 {
		p := Position{Key: strs[rng.IntN(len(strs))], Dir: strs[rng.IntN(len(strs))], Path: strs[rng.IntN(len(strs))],
			Inode: rng.Uint64(), Offset: rng.Int64() - rng.Int64()}
		if i%2 == 0 {
			p.Seq, p.Size = rng.Uint64N(1000), rng.Int64N(1<<40)
		}
		if i%3 == 0 {
			p.Done = true
		}
		if n := rng.IntN(4); n > 0 {
			p.Head = make([]byte, rng.IntN(100*n))
			for j := range p.Head {
				p.Head[j] = byte(rng.UintN(256))
			}
		}
		want, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		if got := p.appendJSON(nil); !bytes.Equal(got, want) {
			t.Fatalf("position %+v:\n got %s\nwant %s", p, got, want)
		}
		all[fmt.Sprint(i)] = p
	}
	if got, want := string(appendCheckpoint(nil, map[string]Position{})), `{"positions":[]}`; got != want {
		t.Fatalf("no positions: %s, want %s", got, want)
	}
	var c checkpoint
	if err := json.Unmarshal(appendCheckpoint(nil, all), &c); err != nil || len(c.Positions) != len(all) {
		t.Fatalf("500 positions decoded to %d (%v)", len(c.Positions), err)
	}
}
