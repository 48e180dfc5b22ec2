package logshipper

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
)

// Position is where reading of one file stands: everything before Offset
// has been acknowledged by the sink.
type Position struct {
	// Dir is the container's log dir; Path the file's name when last seen.
	Dir   string `json:"dir"`
	Path  string `json:"path"`
	Inode uint64 `json:"inode"`
	// Offset is the first byte not yet shipped, always at a line boundary.
	Offset int64 `json:"offset"`
}

// checkpoint is the persisted state: one Position per file (by inode).
type checkpoint struct {
	Positions []Position `json:"positions"`
}

// loadCheckpoint reads path; a missing file is an empty checkpoint.
func loadCheckpoint(path string) (map[uint64]Position, error) {
	out := map[uint64]Position{}
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return out, nil
	}
	if err != nil {
		return nil, err
	}
	var c checkpoint
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("corrupt checkpoint %s: %w", path, err)
	}
	for _, p := range c.Positions {
		out[p.Inode] = p
	}
	return out, nil
}

// saveCheckpoint writes the positions atomically: a temporary file, fsync,
// rename, fsync of the directory. A crash leaves the old or the new state.
func saveCheckpoint(path string, positions map[uint64]Position) error {
	c := checkpoint{Positions: make([]Position, 0, len(positions))}
	for _, p := range positions {
		c.Positions = append(c.Positions, p)
	}
	b, err := json.Marshal(c)
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	d, err := os.Open(filepath.Dir(path))
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
