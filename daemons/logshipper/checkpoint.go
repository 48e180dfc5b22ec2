package logshipper

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"

	"github.com/trellis-dev/trellis/internal/fsync"
)

// Position is where reading of one file stands: everything before Offset
// has been acknowledged by the sink.
type Position struct {
	// Key names the file generation: a file truncated in place starts a
	// new generation, and its copy carries on the old one.
	Key string `json:"key"`
	// Seq orders the generations of a container's log: a lower one was
	// written first and is read first.
	Seq uint64 `json:"seq,omitempty"`
	// Dir is the container's log dir; Path the file's name when last seen.
	Dir   string `json:"dir"`
	Path  string `json:"path"`
	Inode uint64 `json:"inode"`
	// Offset is the first byte not yet shipped, always at a line boundary.
	Offset int64 `json:"offset"`
	// Size is the largest size seen of the generation (saved with the
	// next position, so it may lag): if the generation is gone before it
	// was read, at least Size-Offset bytes were lost.
	Size int64 `json:"size,omitempty"`
	// Done: a rotated file read to its end and closed. It is remembered
	// while it is on disk, so that it is not taken for an unread
	// generation; lines written to it later are read from Offset.
	Done bool `json:"done,omitempty"`
	// Head is the file's first bytes: a file whose head changed was
	// truncated and rewritten (copytruncate), and the copy with this head
	// holds the lines from Offset on.
	Head []byte `json:"head,omitempty"`
}

// checkpoint is the persisted state: one Position per generation still on
// disk.
type checkpoint struct {
	Positions []Position `json:"positions"`
}

// loadCheckpoint reads path: the positions and the sequence number of the
// record they came from. A missing file is an empty checkpoint.
func loadCheckpoint(path string) (map[string]Position, uint64, error) {
	out := map[string]Position{}
	b, seq, err := fsync.ReadRecord(path)
	if errors.Is(err, fs.ErrNotExist) {
		return out, 0, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("read the checkpoint: %w", err)
	}
	var c checkpoint
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, 0, fmt.Errorf("corrupt checkpoint %s: %w", path, err)
	}
	for _, p := range c.Positions {
		if p.Key == "" {
			p.Key = fmt.Sprint(p.Inode)
		}
		out[p.Key] = p
	}
	return out, seq, nil
}

// saveCheckpoint writes the encoded positions (appendCheckpoint) durably
// into the checkpoint's record file (fsync.RecordWriter): a crash leaves
// the old or the new state. A checkpoint written whole by an older shipper
// is read as it is, and replaced by a record file on the first save.
func saveCheckpoint(w *fsync.RecordWriter, encoded []byte) error {
	if err := w.Write(encoded); err != nil {
		return fmt.Errorf("save the checkpoint: %w", err)
	}
	return nil
}
