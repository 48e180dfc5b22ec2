package logshipper

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// TestLogArenaKeepsEveryMessage: messages added to an arena, from one
// buffer overwritten after each add (as the reader's is), read back
// unchanged after many more adds, across chunks, and with messages too
// large for a chunk among them.
func TestLogArenaKeepsEveryMessage(t *testing.T) {
	var a logArena
	rng := rand.New(rand.NewPCG(7, 1))
	buf := make([]byte, logChunk)
	var want, got []string
	for i := range 5000 {
		n := rng.IntN(300)
		if i%500 == 0 {
			n = logChunk/4 + rng.IntN(logChunk/2) // its own string
		}
		msg := buf[:n]
		for j := range msg {
			msg[j] = byte('a' + rng.IntN(26))
		}
		want = append(want, string(msg))
		got = append(got, a.add(msg))
		for j := range msg {
			msg[j] = '#' // the reader's next read
		}
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("message %d of %d: %d bytes read back as %q…", i, len(want), len(want[i]), got[i][:min(len(got[i]), 20)])
		}
	}
}

// TestLogArenaAllocatesPerChunk: a batch's lines cost an allocation per
// 64 KiB of messages, not one each.
func TestLogArenaAllocatesPerChunk(t *testing.T) {
	msg := bytes.Repeat([]byte("GET /api/v1/items/1 200 12ms "), 4) // 116 bytes
	const lines = 10000
	allocs := testing.AllocsPerRun(5, func() {
		var a logArena
		for range lines {
			a.add(msg)
		}
	})
	chunks := float64(lines*len(msg)/logChunk + 1)
	if allocs > chunks+1 {
		t.Fatalf("%d lines of %d bytes: %.0f allocations, want at most %.0f (one per %d KiB chunk)", lines, len(msg), allocs, chunks+1, logChunk>>10)
	}
	t.Logf("%d lines of %d bytes: %.0f allocations", lines, len(msg), allocs)
}
