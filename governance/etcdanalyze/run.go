package etcdanalyze

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
)

// RunOptions say what to make of a snapshot.
type RunOptions struct {
	// Top is how many key spaces the table lists (0: all).
	Top int
	// Folded, if set, is a file to write folded stacks to.
	Folded string
	// SVG, if set, is a file to write a flame graph of the keyspace to.
	SVG string
	// Output is "table" or "json".
	Output string
}

// Run analyses the snapshot at path, writes the files opts asks for, and
// the report to w as a table or JSON.
func Run(path string, opts RunOptions, w io.Writer) error {
	r, err := Analyze(path)
	if err != nil {
		return err
	}
	if opts.Folded != "" {
		if err := writeFile(opts.Folded, r.WriteFolded); err != nil {
			return err
		}
	}
	if opts.SVG != "" {
		if err := writeFile(opts.SVG, r.WriteSVG); err != nil {
			return err
		}
	}
	switch opts.Output {
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	case "table":
		return r.WriteTable(w, opts.Top)
	default:
		return fmt.Errorf("unknown --output %q: use table or json", opts.Output)
	}
}

func writeFile(path string, write func(io.Writer) error) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("failed to create %s: %w", path, err)
	}
	if err := write(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
