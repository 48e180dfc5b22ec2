package logshipper

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/trellis-dev/trellis/daemons/logshipper/sink"
)

var errFileChanged = errors.New("file changed while opening")

// gap reports bytes [from, to) of a container's log generation as lost
// before they were read: deleted past retention while the shipper was
// down, truncated with no copy, or given up on after the deleted-file
// grace. It is counted (per pod and container), logged once, and a marker
// record goes into the batch where the lines would have been, so the
// consumer sees the hole. to is the largest size seen of the generation,
// so the count is a lower bound (to <= from: the size is not known).
func (s *Shipper) gap(b *batch, dir, name string, ino uint64, from, to int64, reason string) {
	ctr := filepath.Base(dir)
	pod := strings.SplitN(filepath.Base(filepath.Dir(dir)), "_", 3)
	for len(pod) < 3 {
		pod = append(pod, "")
	}
	lost := max(to-from, 0)
	path := filepath.Join(dir, name)
	s.metrics.skippedBytes.WithLabelValues(pod[0], pod[1], ctr).Add(float64(lost))
	s.metrics.gaps.WithLabelValues(pod[0], pod[1], ctr).Inc()
	s.log.Warn("log lines lost before they were read", "file", path, "inode", ino, "from", from, "to", max(to, from), "bytes", lost, "reason", reason)
	r := s.record(pod[0], pod[1], pod[2], ctr)
	r.Time = s.cfg.Clock.Now().UTC()
	r.Log = fmt.Sprintf("trellis-log-shipper: at least %d bytes of %s (from offset %d) were lost before they were read: %s", lost, path, from, reason)
	r.Gap = &sink.Gap{File: path, Inode: ino, From: from, To: max(to, from), Bytes: lost, Reason: reason}
	b.records = append(b.records, r)
}
