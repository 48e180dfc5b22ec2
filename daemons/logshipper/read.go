package logshipper

import (
	"bytes"
	"errors"
	"io"
	"path/filepath"
	"time"

	"github.com/trellis-dev/trellis/daemons/logshipper/sink"
)

const readChunk = 64 << 10

// readFile reads what is new in f and appends complete lines to b. It
// returns the number of bytes read.
func (s *Shipper) readFile(f *file, b *batch) (int, error) {
	if cap(f.buf)-len(f.buf) < readChunk/2 {
		grown := make([]byte, len(f.buf), len(f.buf)+readChunk)
		copy(grown, f.buf)
		f.buf = grown
	}
	n, err := f.f.ReadAt(f.buf[len(f.buf):cap(f.buf)], f.pos)
	if n == 0 {
		if f.idleSince.IsZero() && f.rotated {
			f.idleSince = s.cfg.Clock.Now()
		}
		if errors.Is(err, io.EOF) {
			err = nil
		}
		return 0, err
	}
	if errors.Is(err, io.EOF) {
		err = nil
	}
	if !f.headMatches() {
		// Truncated and rewritten since the last scan, and regrown past
		// pos: these bytes may be the new generation's, at an offset that
		// means nothing in it. The lines not yet read are in the copy.
		s.log.Info("file truncated under the reader; reading its copy, then the file from the start", "file", filepath.Join(f.dir, f.name))
		s.truncated(f, f.pos-int64(len(f.buf)), false, b)
		s.save()
		return 0, err
	}
	f.idleSince = time.Time{}
	if len(f.head) < headLen && f.pos-int64(len(f.buf)) == 0 && f.pos < headLen {
		// Remember the file's first bytes (read from offset 0), in an
		// array of their own: the old one may be a saved Position's Head,
		// which the sender encodes under s.mu (this goroutine holds no
		// lock here).
		f.head = bytes.Clone(f.buf[:min(len(f.buf)+n, headLen)])
	}
	f.buf = f.buf[:len(f.buf)+n]
	f.pos += int64(n)
	f.size = max(f.size, f.pos)
	s.metrics.bytesIn.Add(float64(n))
	start := f.pos - int64(len(f.buf)) // file offset of buf[0]
	consumed := 0
	// One lookup of the pod's identity, and one checkpoint, per read
	// instead of per line: the lines of one read were all on disk when it
	// was made, so the pod's version at that moment is theirs.
	base := s.fileRecord(f)
	last := int64(-1)
	lines := 0
	for {
		i := bytes.IndexByte(f.buf[consumed:], '\n')
		if i < 0 {
			break
		}
		line := f.buf[consumed : consumed+i]
		consumed += i + 1
		if f.skipping {
			f.skipping = false // the end of an over-long line
			continue
		}
		lines++
		if end := start + int64(consumed); s.line(f, &base, line, end, b) {
			last = end
		}
	}
	rest := f.buf[consumed:]
	if len(rest) > s.cfg.MaxLine {
		// An over-long physical line: ship what we have, skip to '\n'.
		lines++
		s.line(f, &base, rest[:s.cfg.MaxLine], -1, b)
		f.skipping, rest = true, nil
		s.metrics.truncated.Inc()
	}
	s.metrics.linesIn.Add(float64(lines))
	if last >= 0 {
		b.ends[f.key] = f.position(last)
	}
	// Keep the unparsed tail; shrink a buffer grown for a long line.
	if cap(f.buf) > 1<<20 && len(rest) < 32<<10 {
		f.buf = append(make([]byte, 0, 32<<10), rest...)
	} else {
		f.buf = append(f.buf[:0], rest...)
	}
	return n, err
}

// line handles one physical line ending at file offset end (-1: not a line
// boundary, so no checkpoint may point there), making its record from
// base, and reports whether the batch may be checkpointed at end: a
// record was added and end is a line boundary.
func (s *Shipper) line(f *file, base *sink.Record, raw []byte, end int64, b *batch) bool {
	cut := len(raw) > s.cfg.MaxLine
	if cut {
		raw = raw[:s.cfg.MaxLine]
		s.metrics.truncated.Inc()
	}
	e := parseCRI(raw, &s.times)
	if e.Partial {
		if cut {
			f.partialTrunc = true
		}
		if len(f.partial)+len(e.Message) > s.cfg.MaxLine {
			room := max(s.cfg.MaxLine-len(f.partial), 0)
			f.partial = append(f.partial, e.Message[:room]...)
			f.partialTrunc = true
		} else {
			f.partial = append(f.partial, e.Message...)
		}
		return false
	}
	msg := e.Message
	trunc := end < 0 || cut
	if len(f.partial) > 0 {
		msg = append(f.partial, e.Message...)
		if len(msg) > s.cfg.MaxLine {
			msg, f.partialTrunc = msg[:s.cfg.MaxLine], true
		}
		trunc = trunc || f.partialTrunc
		f.partial, f.partialTrunc = nil, false
	}
	if e.Malformed {
		s.metrics.malformed.Inc()
	}
	r := *base
	r.Time, r.Stream, r.Log, r.Truncated, r.Malformed = e.Time, e.Stream, b.logs.add(msg), trunc, e.Malformed
	b.records = append(b.records, r)
	b.bytes += len(msg)
	return end >= 0
}

// record is a record of a container's log, with its pod's identity.
func (s *Shipper) record(ns, pod, uid, container string) sink.Record {
	return sink.Record{Identity: s.identity(ns, pod, uid, container, s.lookup(uid))}
}

// lookup is the pod version with uid that enriches its records (nil: the
// path only, without an informer or before it has the pod).
func (s *Shipper) lookup(uid string) *PodInfo {
	if s.cfg.Meta == nil {
		return nil
	}
	info, ok := s.cfg.Meta.Lookup(uid)
	if !ok {
		return nil
	}
	return info
}

// identity is a container's identity, enriched from info if it is not
// nil.
func (s *Shipper) identity(ns, pod, uid, container string, info *PodInfo) *sink.Identity {
	id := &sink.Identity{Namespace: ns, Pod: pod, Container: container, UID: uid, Node: s.cfg.Node}
	if info != nil {
		id.Service, id.Env, id.Labels, id.Workload = info.Service, info.Env, info.Labels, info.Workload
	}
	return id
}

// fileRecord is record for f's container, with one identity per pod
// version, rendered once and shared by every line: sorting and escaping
// the same labels for each line was a sixth of the shipper's CPU in the
// production bench. A new one is made (records in flight keep the old
// one) when the informer has a new version of the pod, or loses or finds
// it.
func (s *Shipper) fileRecord(f *file) sink.Record {
	info := s.lookup(f.uid)
	if f.identity == nil || f.identityOf != info {
		f.identity, f.identityOf = s.identity(f.ns, f.pod, f.uid, f.container, info), info
		f.identity.Render()
	}
	return sink.Record{Identity: f.identity}
}
