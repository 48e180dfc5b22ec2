package logshipper

import "strings"

// logChunk is how much of a batch's messages one allocation holds.
const logChunk = 64 << 10

// logArena holds a batch's messages as strings cut from 64 KiB chunks:
// one allocation per chunk instead of one per line (a string per line was
// 5% of the shipper's CPU in the production bench, most of it allocating).
// A chunk is only ever appended to, so a message already handed out never
// changes; a batch's strings keep its chunks alive until the sink has
// them, as strings of their own would. A message of more than a quarter
// of a chunk gets a string of its own, so a chunk wastes at most that.
type logArena struct {
	chunk strings.Builder
}

// add returns msg as a string.
func (a *logArena) add(msg []byte) string {
	if len(msg) > logChunk/4 {
		return string(msg)
	}
	if a.chunk.Cap()-a.chunk.Len() < len(msg) {
		a.chunk = strings.Builder{} // the old chunk stays with its strings
		a.chunk.Grow(logChunk)
	}
	start := a.chunk.Len()
	a.chunk.Write(msg)
	return a.chunk.String()[start:]
}
