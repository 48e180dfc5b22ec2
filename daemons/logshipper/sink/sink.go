// Package sink holds where the log shipper sends records: Kafka
// (franz-go), stdout, or a local file.
package sink

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"sync"
	"time"
)

// Record is one log line with its pod's identity.
type Record struct {
	Time   time.Time `json:"time"`
	Stream string    `json:"stream"`
	Log    string    `json:"log"`
	// Identity is the line's container and pod (nil: none). The shipper
	// shares one among the lines of a pod version, so a batch holds a
	// pointer per line, not a copy: the record was 240 bytes copied twice
	// per line, and cleared per batch.
	*Identity
	Truncated bool `json:"truncated,omitempty"`
	Malformed bool `json:"malformed,omitempty"`
	// Gap, on a record the shipper adds, marks lines of this container
	// lost before they were read; Log says so in words.
	Gap *Gap `json:"gap,omitempty"`
}

// noIdentity is a record's identity when it has none: empty, never
// written.
var noIdentity Identity

// identity is r's identity, an empty one when it has none.
func (r *Record) identity() *Identity {
	if r.Identity == nil {
		return &noIdentity
	}
	return r.Identity
}

// Identity is what a record says of its container and pod. Once records
// share it, it must not change: records in flight read it.
type Identity struct {
	Namespace string `json:"namespace"`
	Pod       string `json:"pod"`
	Container string `json:"container"`
	UID       string `json:"uid"`
	Node      string `json:"node,omitempty"`
	Service   string `json:"service,omitempty"`
	Env       string `json:"env,omitempty"`
	// Workload is the pod's owning workload (nil: a bare pod).
	Workload *Workload         `json:"workload,omitempty"`
	Labels   map[string]string `json:"labels,omitempty"`

	// rendered, when set, is AppendIdentity's output, rendered once per
	// pod version and reused for every line (see Render).
	rendered []byte
}

// Workload is the workload owning a pod: a Deployment (through its
// ReplicaSet), StatefulSet, DaemonSet, Job, or any other controller.
type Workload struct {
	Kind string `json:"kind"`
	Name string `json:"name"`
}

// Gap is a hole in a container's shipped log: bytes From to To of File
// (a lower bound: Bytes) were gone before the shipper read them.
type Gap struct {
	File   string `json:"file"`
	Inode  uint64 `json:"inode"`
	From   int64  `json:"from"`
	To     int64  `json:"to"`
	Bytes  int64  `json:"bytes"`
	Reason string `json:"reason"`
}

// Sink delivers batches. Send returns only once the whole batch is durably
// accepted (Kafka: acknowledged by all in-sync replicas), or an error. It
// must not keep the batch's slice after it returns: the shipper reuses it.
type Sink interface {
	Name() string
	Send(ctx context.Context, batch []Record) error
	Close()
}

// Writer writes JSON lines to an io.Writer (stdout, or a file).
type Writer struct {
	name string
	mu   sync.Mutex
	w    *bufio.Writer
	f    *os.File
	buf  []byte
	// times writes the records' times (under mu).
	times timeWriter
}

// Stdout writes to standard output.
func Stdout() *Writer { return &Writer{name: "stdout", w: bufio.NewWriterSize(os.Stdout, 1<<20)} }

// File appends to path (fsynced on every batch).
func File(path string) (*Writer, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open the file sink: %w", err)
	}
	return &Writer{name: "file", w: bufio.NewWriterSize(f, 1<<20), f: f}, nil
}

// NewWriter writes to w (tests).
func NewWriter(name string, w io.Writer) *Writer { return &Writer{name: name, w: bufio.NewWriter(w)} }

func (s *Writer) Name() string { return s.name }

func (s *Writer) Send(_ context.Context, batch []Record) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range batch {
		s.buf = batch[i].appendJSON(s.buf[:0], &s.times)
		s.buf = append(s.buf, '\n')
		if _, err := s.w.Write(s.buf); err != nil {
			return fmt.Errorf("write a record to %s: %w", s.name, err)
		}
	}
	if err := s.w.Flush(); err != nil {
		return fmt.Errorf("flush to %s: %w", s.name, err)
	}
	if s.f != nil {
		return s.f.Sync()
	}
	return nil
}

func (s *Writer) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	_ = s.w.Flush()
	if s.f != nil {
		_ = s.f.Close()
	}
}
