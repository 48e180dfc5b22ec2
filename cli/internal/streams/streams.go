// Package streams holds the standard streams commands write to.
package streams

import "io"

// Streams are a command's standard streams.
type Streams struct {
	In       io.Reader
	Out, Err io.Writer
}
