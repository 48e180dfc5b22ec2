// Package logshipper is the node log shipper: it tails every container's
// CRI log under /var/log/pods, reassembles partial lines, attaches the
// pod's identity from one node-scoped informer, and ships batches to a sink
// (Kafka, stdout or a file) at least once: a file's position is
// checkpointed only after the sink acknowledged everything before it.
package logshipper

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/clock"

	"github.com/trellis-dev/trellis/daemons/logshipper/sink"
)

// Config configures a Shipper.
type Config struct {
	// Root is the pods' log root (default /var/log/pods).
	Root string
	// Checkpoint is the file holding read positions.
	Checkpoint string
	Sink       sink.Sink
	// Meta enriches records (nil: only what the path says).
	Meta MetadataSource
	Node string
	// Poll is how often files are checked for growth, rotation and new
	// files when there is nothing to read (default 200ms).
	Poll time.Duration
	// BatchBytes and BatchLines bound a batch (default 1 MiB, 10,000);
	// Linger is how long a partial batch waits (default 200ms).
	BatchBytes int
	BatchLines int
	Linger     time.Duration
	// MaxLine caps a reassembled line; the rest is dropped and the record
	// marked truncated (default 256 KiB).
	MaxLine int
	// DeletedGrace bounds how long a deleted file is kept open to ship its
	// remaining lines while the sink is down (default 10m).
	DeletedGrace time.Duration
	// RotatedGrace is how long a renamed file is watched for late writes
	// after its last line was read (default 2s).
	RotatedGrace time.Duration
	Logger       *slog.Logger
	// Clock times polls, lingering batches, graces, retries and the
	// checkpoint age (default the real clock; tests step a fake one).
	Clock clock.WithTicker
}

// MetadataSource says who a log belongs to.
type MetadataSource interface {
	// Lookup returns the pod's service, env and labels by UID (ok=false
	// when unknown).
	Lookup(uid string) (service, env string, labels map[string]string, ok bool)
}

// Shipper ships logs until its context ends.
type Shipper struct {
	cfg     Config
	log     *slog.Logger
	files   map[uint64]*file
	saved   map[uint64]Position // from the checkpoint at start
	batches chan *batch
	metrics *Metrics

	saveMu         sync.Mutex
	mu             sync.Mutex
	acked          map[string]Position // by generation key: acknowledged positions
	lastCheckpoint time.Time
}

// file is one log file being read.
type file struct {
	dir, name               string
	ns, pod, uid, container string
	inode                   uint64
	key                     string // the generation (see Position.Key)
	f                       *os.File
	// pos is the file offset just past buf's bytes; buf holds bytes read
	// but not yet parsed into complete lines.
	pos int64
	buf []byte
	// partial: message chunks of a line still waiting for its F chunk.
	partial      []byte
	partialTrunc bool
	// skipping: inside an over-long physical line, dropping until '\n'.
	skipping bool
	// rotated: the path no longer names this file (renamed or deleted).
	rotated   bool
	deleted   bool
	rotatedAt time.Time
	idleSince time.Time
	// head is the file's first bytes: if they change, the file was
	// truncated and rewritten (copytruncate), even if it regrew past pos.
	head []byte
}

const headLen = 64

type batch struct {
	records []sink.Record
	bytes   int
	ends    map[string]Position
	forget  []string
}

// New returns a shipper.
func New(cfg Config) (*Shipper, error) {
	if cfg.Sink == nil {
		return nil, errors.New("a sink is required")
	}
	if cfg.Root == "" {
		cfg.Root = "/var/log/pods"
	}
	if cfg.Checkpoint == "" {
		return nil, errors.New("a checkpoint file is required")
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&cfg.Poll, 200*time.Millisecond)
	def(&cfg.Linger, 200*time.Millisecond)
	def(&cfg.DeletedGrace, 10*time.Minute)
	def(&cfg.RotatedGrace, 2*time.Second)
	if cfg.BatchBytes == 0 {
		cfg.BatchBytes = 1 << 20
	}
	if cfg.BatchLines == 0 {
		cfg.BatchLines = 10000
	}
	if cfg.MaxLine == 0 {
		cfg.MaxLine = 256 << 10
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	saved, err := loadCheckpoint(cfg.Checkpoint)
	if err != nil {
		return nil, err
	}
	acked := make(map[string]Position, len(saved))
	byInode := make(map[uint64]Position, len(saved))
	for k, v := range saved {
		acked[k] = v
		byInode[v.Inode] = v
	}
	return &Shipper{cfg: cfg, log: cfg.Logger, files: map[uint64]*file{}, saved: byInode, acked: acked,
		batches: make(chan *batch, 1), metrics: newMetrics(), lastCheckpoint: cfg.Clock.Now()}, nil
}

// Metrics returns the shipper's metrics.
func (s *Shipper) Metrics() *Metrics { return s.metrics }

// Run reads and ships until ctx ends. Lines read but not acknowledged when
// it returns are read again by the next run (at-least-once).
func (s *Shipper) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	wg.Go(func() { s.send(ctx) })
	err := s.read(ctx)
	close(s.batches)
	wg.Wait()
	for _, f := range s.files {
		f.f.Close()
	}
	return err
}

func (s *Shipper) read(ctx context.Context) error {
	b := newBatch()
	lastFlush := s.cfg.Clock.Now()
	lastScan := time.Time{}
	for ctx.Err() == nil {
		if s.cfg.Clock.Since(lastScan) >= s.cfg.Poll {
			s.discover(b)
			lastScan = s.cfg.Clock.Now()
		}
		progress := false
		for _, f := range s.files {
			n, err := s.readFile(f, b)
			if err != nil {
				s.log.Warn("read failed", "file", filepath.Join(f.dir, f.name), "err", err)
			}
			if n > 0 {
				progress = true
			}
			if len(b.records) >= s.cfg.BatchLines || b.bytes >= s.cfg.BatchBytes {
				if !s.flush(ctx, b) {
					return nil
				}
				b, lastFlush = newBatch(), s.cfg.Clock.Now()
			}
		}
		if (len(b.records) > 0 || len(b.forget) > 0) && (s.cfg.Clock.Since(lastFlush) >= s.cfg.Linger || !progress) {
			if !s.flush(ctx, b) {
				return nil
			}
			b, lastFlush = newBatch(), s.cfg.Clock.Now()
		}
		if !progress {
			select {
			case <-ctx.Done():
			case <-s.cfg.Clock.After(s.cfg.Poll):
			}
		}
	}
	return nil
}

func newBatch() *batch { return &batch{ends: map[string]Position{}} }

// newKey names a new generation of the file with inode ino. The wall
// clock only makes the name unique: it is not a time the shipper acts on,
// so a test's fake clock does not apply.
func newKey(ino uint64) string { return fmt.Sprintf("%d.%d", ino, time.Now().UnixNano()) }

// flush hands b to the sender; it blocks while the sender is busy
// (backpressure: nothing more is read while the sink is slow or down).
// While it waits it keeps discovering: files created, renamed or truncated
// during a long sink outage are registered (and copies found) in time.
func (s *Shipper) flush(ctx context.Context, b *batch) bool {
	t := s.cfg.Clock.NewTicker(s.cfg.Poll)
	defer t.Stop()
	for {
		select {
		case s.batches <- b:
			return true
		case <-ctx.Done():
			return false
		case <-t.C():
			s.discover(b)
		}
	}
}

func (s *Shipper) send(ctx context.Context) {
	for b := range s.batches {
		backoff := wait.Backoff{Duration: 100 * time.Millisecond, Factor: 2, Jitter: 0.5, Steps: 1 << 30, Cap: 5 * time.Second}
		for len(b.records) > 0 {
			err := s.cfg.Sink.Send(ctx, b.records)
			if err == nil {
				break
			}
			s.metrics.sendErrors.WithLabelValues(s.cfg.Sink.Name()).Inc()
			if ctx.Err() != nil {
				return // unacknowledged: read again next run
			}
			s.log.Warn("sink failed; retrying the batch", "sink", s.cfg.Sink.Name(), "err", err)
			select {
			case <-ctx.Done():
				return
			case <-s.cfg.Clock.After(backoff.Step()):
			}
		}
		s.metrics.linesOut.WithLabelValues(s.cfg.Sink.Name()).Add(float64(len(b.records)))
		s.metrics.bytesOut.WithLabelValues(s.cfg.Sink.Name()).Add(float64(b.bytes))
		s.mu.Lock()
		for k, p := range b.ends {
			if cur, ok := s.acked[k]; ok {
				// Keep where the generation lives now (a copy may have
				// taken it over since these lines were read).
				cur.Offset = p.Offset
				if len(p.Head) > len(cur.Head) {
					cur.Head = p.Head
				}
				s.acked[k] = cur
			} else {
				s.acked[k] = p
			}
		}
		for _, k := range b.forget {
			delete(s.acked, k)
		}
		s.mu.Unlock()
		s.save()
	}
}

// save writes the acknowledged positions. Saves are serialized and each
// takes its snapshot inside the lock, so the newest state is written last.
func (s *Shipper) save() {
	s.saveMu.Lock()
	defer s.saveMu.Unlock()
	s.mu.Lock()
	snapshot := make(map[string]Position, len(s.acked))
	for k, v := range s.acked {
		snapshot[k] = v
	}
	s.mu.Unlock()
	if err := saveCheckpoint(s.cfg.Checkpoint, snapshot); err != nil {
		s.log.Error("failed to save the checkpoint", "err", err)
		return
	}
	s.mu.Lock()
	s.lastCheckpoint = s.cfg.Clock.Now()
	s.mu.Unlock()
}

// register records a file generation (at its start offset) before
// anything of it is shipped, and later where it lives and its head: if it
// is renamed or copied while we are down, the next run knows the rotated
// file is ours to finish (and tells it from a copytruncate copy). It
// reports whether the checkpoint needs saving.
func (s *Shipper) register(f *file) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if cur, ok := s.acked[f.key]; ok {
		changed := cur.Inode != f.inode || cur.Path != f.name || len(f.head) > len(cur.Head)
		cur.Inode, cur.Path, cur.Dir = f.inode, f.name, f.dir
		if len(f.head) > len(cur.Head) {
			cur.Head = f.head
		}
		s.acked[f.key] = cur
		return changed
	}
	s.acked[f.key] = Position{Key: f.key, Dir: f.dir, Path: f.name, Inode: f.inode, Offset: f.pos, Head: f.head}
	return true
}

// CheckpointAge is the time since the checkpoint was last written.
func (s *Shipper) CheckpointAge() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cfg.Clock.Since(s.lastCheckpoint)
}

var (
	currentLog = regexp.MustCompile(`^[0-9]+\.log$`)
	rotatedLog = regexp.MustCompile(`^[0-9]+\.log\.[^/]+$`)
)

// discover opens new files, notices renamed, deleted and truncated ones,
// and closes the ones that are finished.
func (s *Shipper) discover(b *batch) {
	registered := false
	defer func() {
		if registered {
			s.save()
		}
	}()
	pods, _ := os.ReadDir(s.cfg.Root)
	seen := map[uint64]string{} // inode -> path
	for _, pd := range pods {
		if !pd.IsDir() {
			continue
		}
		parts := strings.SplitN(pd.Name(), "_", 3)
		if len(parts) != 3 {
			continue
		}
		ctrs, _ := os.ReadDir(filepath.Join(s.cfg.Root, pd.Name()))
		for _, cd := range ctrs {
			if !cd.IsDir() {
				continue
			}
			dir := filepath.Join(s.cfg.Root, pd.Name(), cd.Name())
			ents, _ := os.ReadDir(dir)
			for _, e := range ents {
				name := e.Name()
				current := currentLog.MatchString(name)
				if !current && (!rotatedLog.MatchString(name) || strings.HasSuffix(name, ".gz")) {
					continue
				}
				fi, err := e.Info()
				if err != nil {
					continue
				}
				ino := fi.Sys().(*syscall.Stat_t).Ino
				seen[ino] = filepath.Join(dir, name)
				if f, ok := s.files[ino]; ok {
					f.name = name
					continue
				}
				pos, known := s.saved[ino]
				if !current && !known {
					// A rotated name we never read: a copytruncate copy of
					// lines already shipped, or older than this node's
					// shipper. Not ours to ship.
					continue
				}
				f, err := s.open(dir, name, ino, parts, cd.Name())
				if err != nil {
					s.log.Warn("cannot open log", "file", filepath.Join(dir, name), "err", err)
					continue
				}
				delete(s.saved, ino)
				s.files[ino] = f
				f.key = newKey(ino)
				if known {
					f.key, f.head = pos.Key, pos.Head
					if pos.Offset <= fi.Size() && f.headMatches() {
						f.pos = pos.Offset
					} else {
						// Truncated and rewritten while we were down: the
						// lines after our position are in the copy.
						s.truncated(f, pos.Offset)
					}
				}
				if s.register(f) {
					registered = true
				}
			}
		}
	}
	now := s.cfg.Clock.Now()
	for ino, f := range s.files {
		path, ok := seen[ino]
		if ok && currentLog.MatchString(filepath.Base(path)) {
			// Still the live file: check for copytruncate.
			f.captureHead()
			if s.register(f) { // a new head or name to persist
				registered = true
			}
			if fi, err := f.f.Stat(); err == nil && (fi.Size() < f.pos || !f.headMatches()) {
				s.log.Info("file truncated; reading its copy, then the file from the start", "file", path)
				s.truncated(f, f.pos-int64(len(f.buf)))
				registered = true
			}
			if fi, err := f.f.Stat(); err == nil {
				s.metrics.lag.WithLabelValues(f.ns, f.pod, f.container).Set(float64(fi.Size() - f.pos))
			}
			continue
		}
		if !f.rotated {
			f.rotated, f.rotatedAt = true, now
			f.deleted = !ok
		}
		if !ok && !f.deleted {
			f.deleted, f.rotatedAt = true, now
		}
		finished := !f.idleSince.IsZero() && now.Sub(f.idleSince) >= s.cfg.RotatedGrace
		expired := f.deleted && now.Sub(f.rotatedAt) >= s.cfg.DeletedGrace
		if finished || expired {
			if expired && !finished {
				s.log.Warn("gave up on a deleted file before reading it all", "dir", f.dir, "inode", ino)
				s.metrics.abandoned.Inc()
			}
			f.f.Close()
			delete(s.files, ino)
			b.forget = append(b.forget, f.key)
			s.metrics.lag.DeleteLabelValues(f.ns, f.pod, f.container)
		}
	}
	// Checkpointed files that no longer exist anywhere: forget them.
	for ino, p := range s.saved {
		if _, ok := seen[ino]; !ok {
			delete(s.saved, ino)
			b.forget = append(b.forget, p.Key)
		}
	}
}

func (s *Shipper) open(dir, name string, ino uint64, podParts []string, container string) (*file, error) {
	fh, err := os.Open(filepath.Join(dir, name))
	if err != nil {
		return nil, err
	}
	fi, err := fh.Stat()
	if err != nil || fi.Sys().(*syscall.Stat_t).Ino != ino {
		fh.Close()
		return nil, fmt.Errorf("file changed while opening")
	}
	return &file{dir: dir, name: name, ns: podParts[0], pod: podParts[1], uid: podParts[2], container: container,
		inode: ino, f: fh, buf: make([]byte, 0, 32<<10)}, nil
}

// truncated handles a copytruncate of f: the copy (a rotated name in the
// same dir starting with f's head) is read from offset, the position up to
// which f was parsed, and f from its start.
func (s *Shipper) truncated(f *file, offset int64) {
	s.metrics.truncations.Inc()
	if len(f.head) > 0 {
		if c := s.findCopy(f.dir, f.head, offset); c != nil {
			// The copy carries on f's generation.
			c.pos, c.head, c.rotated, c.rotatedAt, c.key = offset, f.head, true, s.cfg.Clock.Now(), f.key
			c.partial, c.partialTrunc = f.partial, f.partialTrunc
			s.files[c.inode] = c
			s.register(c)
		}
	}
	f.pos, f.buf, f.partial, f.partialTrunc, f.skipping, f.head = 0, f.buf[:0], nil, false, false, nil
	f.key = newKey(f.inode)
	// The new generation's head at once, if it has one: a checkpoint with
	// no head cannot tell this generation from the next.
	f.captureHead()
	s.register(f)
}

// findCopy opens an untracked rotated file of dir that starts with head and
// is longer than offset.
func (s *Shipper) findCopy(dir string, head []byte, offset int64) *file {
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if !rotatedLog.MatchString(e.Name()) || strings.HasSuffix(e.Name(), ".gz") {
			continue
		}
		fi, err := e.Info()
		if err != nil || fi.Size() < offset {
			continue
		}
		ino := fi.Sys().(*syscall.Stat_t).Ino
		if _, tracked := s.files[ino]; tracked {
			continue
		}
		pod := strings.SplitN(filepath.Base(filepath.Dir(dir)), "_", 3)
		if len(pod) != 3 {
			return nil
		}
		c, err := s.open(dir, e.Name(), ino, pod, filepath.Base(dir))
		if err != nil {
			continue
		}
		got := make([]byte, len(head))
		if n, _ := c.f.ReadAt(got, 0); n == len(head) && bytes.Equal(got, head) {
			return c
		}
		c.f.Close()
	}
	return nil
}

// captureHead remembers the file's first bytes (up to headLen) once the
// file has them, extending a short head only while it is still a prefix.
func (f *file) captureHead() bool {
	if len(f.head) >= headLen || f.rotated {
		return false
	}
	head := make([]byte, headLen)
	n, _ := f.f.ReadAt(head, 0)
	if n > len(f.head) && bytes.HasPrefix(head[:n], f.head) {
		f.head = head[:n]
		return true
	}
	return false
}

// headMatches reports whether the file still starts with the bytes it
// started with when first read.
func (f *file) headMatches() bool {
	if len(f.head) == 0 {
		return true
	}
	var buf [headLen]byte // on the stack: every read checks
	cur := buf[:len(f.head)]
	n, _ := f.f.ReadAt(cur, 0)
	return n < len(f.head) || bytes.Equal(cur, f.head)
}

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
		s.truncated(f, f.pos-int64(len(f.buf)))
		s.save()
		return 0, err
	}
	f.idleSince = time.Time{}
	if len(f.head) < headLen && f.pos-int64(len(f.buf)) == 0 && f.pos < headLen {
		// Remember the file's first bytes (read from offset 0).
		f.head = append(f.head[:0], f.buf[:min(len(f.buf)+n, headLen)]...)
	}
	f.buf = f.buf[:len(f.buf)+n]
	f.pos += int64(n)
	s.metrics.bytesIn.Add(float64(n))
	start := f.pos - int64(len(f.buf)) // file offset of buf[0]
	consumed := 0
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
		s.line(f, line, start+int64(consumed), b)
	}
	rest := f.buf[consumed:]
	if len(rest) > s.cfg.MaxLine {
		// An over-long physical line: ship what we have, skip to '\n'.
		s.line(f, rest[:s.cfg.MaxLine], -1, b)
		f.skipping, rest = true, nil
		s.metrics.truncated.Inc()
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
// boundary, so no checkpoint may point there).
func (s *Shipper) line(f *file, raw []byte, end int64, b *batch) {
	s.metrics.linesIn.Inc()
	cut := len(raw) > s.cfg.MaxLine
	if cut {
		raw = raw[:s.cfg.MaxLine]
		s.metrics.truncated.Inc()
	}
	e := ParseCRI(raw)
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
		return
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
	r := sink.Record{Time: e.Time, Stream: e.Stream, Log: string(msg), Namespace: f.ns, Pod: f.pod, Container: f.container,
		UID: f.uid, Node: s.cfg.Node, Truncated: trunc, Malformed: e.Malformed}
	if s.cfg.Meta != nil {
		if svc, env, labels, ok := s.cfg.Meta.Lookup(f.uid); ok {
			r.Service, r.Env, r.Labels = svc, env, labels
		}
	}
	b.records = append(b.records, r)
	b.bytes += len(msg)
	if end >= 0 {
		b.ends[f.key] = Position{Key: f.key, Dir: f.dir, Path: f.name, Inode: f.inode, Offset: end, Head: f.head}
	}
}
