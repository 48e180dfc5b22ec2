// Package logshipper is the node log shipper: it tails every container's
// CRI log under /var/log/pods, reassembles partial lines, attaches the
// pod's identity from one node-scoped informer, and ships batches to a sink
// (Kafka, stdout or a file) at least once: a file's position is
// checkpointed only after the sink acknowledged everything before it.
//
// Every generation of a container's log (each file the runtime wrote
// before a rotation) is read once, oldest first, however many rotations
// happened while the shipper was stopped, slow or dead; a generation gone
// before it was read is reported (metric, log line, marker record), never
// skipped in silence. docs/design/log-shipping.md says how.
package logshipper

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/clock"

	"github.com/trellis-dev/trellis/daemons/logshipper/sink"
	"github.com/trellis-dev/trellis/internal/fsync"
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
	// Lookup returns what is known of the pod by UID (ok=false when
	// unknown). The PodInfo is never modified: a pod that changes gets a
	// new one, so the shipper may keep what it derived from it while
	// Lookup returns the same pointer.
	Lookup(uid string) (info *PodInfo, ok bool)
}

// PodInfo is what a record carries of its pod beyond its log's path.
type PodInfo struct {
	Service, Env string
	Labels       map[string]string
	// Workload is the owning workload (nil: a bare pod).
	Workload *sink.Workload
}

// Shipper ships logs until its context ends.
type Shipper struct {
	cfg     Config
	log     *slog.Logger
	files   map[uint64]*file    // open, by inode
	saved   map[uint64]Position // from the checkpoint at start, not yet found
	done    map[uint64]Position // rotated files read to their end, closed
	nextSeq uint64              // the next generation's order number
	// firstRun: no checkpoint existed, so rotated files in the first scan
	// are older than this node's shipper and not shipped.
	firstRun bool
	batches  chan *batch
	// free holds batches the sender is done with, for the reader to fill
	// again: a batch's record list grown to 10,000 records is kept instead
	// of regrown from empty for every batch (5.6% of the CPU in the
	// production bench, with the GC it made work).
	free    chan *batch
	metrics *Metrics
	// times reads the lines' times; the reader's own.
	times timeParser

	saveMu         sync.Mutex
	checkpoint     *fsync.RecordWriter // under saveMu
	checkpointBuf  []byte              // under saveMu
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
	seq                     uint64 // the generation's order (see Position.Seq)
	f                       *os.File
	// size is the largest size seen of this generation: what a gap counts
	// when the generation is gone before it was read.
	size int64
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
	// identity is this container's records' identity, made and rendered
	// from identityOf, the pod's version then (see fileRecord).
	identity   *sink.Identity
	identityOf *PodInfo
}

const headLen = 64

type batch struct {
	records []sink.Record
	logs    logArena // the records' messages
	bytes   int
	ends    map[string]Position
	// forget: generations gone from disk; finish: rotated files read to
	// their end (kept, marked done, while they are on disk). Both apply
	// once the batch's records are acknowledged.
	forget []string
	finish []Position
}

func (b *batch) empty() bool {
	return len(b.records) == 0 && len(b.forget) == 0 && len(b.finish) == 0
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
	_, statErr := os.Stat(cfg.Checkpoint)
	saved, seq, err := loadCheckpoint(cfg.Checkpoint)
	if err != nil {
		return nil, err
	}
	s := &Shipper{cfg: cfg, log: cfg.Logger, checkpoint: fsync.NewRecordWriter(cfg.Checkpoint, 0o600, seq), files: map[uint64]*file{}, saved: map[uint64]Position{}, done: map[uint64]Position{},
		acked: map[string]Position{}, firstRun: errors.Is(statErr, fs.ErrNotExist), nextSeq: 1,
		batches: make(chan *batch, 1), free: make(chan *batch, 2), metrics: newMetrics(), lastCheckpoint: cfg.Clock.Now()}
	for _, p := range saved {
		// One generation per inode: of two (a checkpoint written before
		// generations were ordered), the newer one.
		if old, ok := s.saved[p.Inode]; ok && old.Seq > p.Seq {
			continue
		}
		s.saved[p.Inode] = p
		s.nextSeq = max(s.nextSeq, p.Seq+1)
	}
	for _, p := range s.saved {
		s.acked[p.Key] = p
	}
	return s, nil
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
	s.saveMu.Lock()
	defer s.saveMu.Unlock()
	if cerr := s.checkpoint.Close(); cerr != nil {
		s.log.Warn("failed to close the checkpoint", "err", cerr)
	}
	return err
}

func (s *Shipper) read(ctx context.Context) error {
	b := s.newBatch()
	lastFlush := s.cfg.Clock.Now()
	lastScan := time.Time{}
	for ctx.Err() == nil {
		if s.cfg.Clock.Since(lastScan) >= s.cfg.Poll {
			s.discover(b)
			lastScan = s.cfg.Clock.Now()
		}
		progress := false
		// A container's generations are read oldest first: a newer one
		// only once every older one is read to its end.
		busy := ""
		for _, f := range s.ordered() {
			if f.dir == busy {
				continue
			}
			seq := f.seq
			n, err := s.readFile(f, b)
			if err != nil {
				s.log.Warn("read failed", "file", filepath.Join(f.dir, f.name), "err", err)
			}
			if n > 0 {
				progress = true
			}
			if n > 0 || f.seq != seq { // read, or became a newer generation
				busy = f.dir
			}
			if len(b.records) >= s.cfg.BatchLines || b.bytes >= s.cfg.BatchBytes {
				if !s.flush(ctx, b) {
					return nil
				}
				b, lastFlush = s.newBatch(), s.cfg.Clock.Now()
			}
		}
		if !b.empty() && (s.cfg.Clock.Since(lastFlush) >= s.cfg.Linger || !progress) {
			if !s.flush(ctx, b) {
				return nil
			}
			b, lastFlush = s.newBatch(), s.cfg.Clock.Now()
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

// newBatch returns an empty batch, a recycled one if the sender has one.
// A new one has room for a full batch up front; with recycling there are
// never more than three (one read, one queued, one sending).
func (s *Shipper) newBatch() *batch {
	select {
	case b := <-s.free:
		return b
	default:
		b := newBatch()
		b.records = make([]sink.Record, 0, min(s.cfg.BatchLines, 1<<14))
		return b
	}
}

// recycle empties b, whose records the sink acknowledged and no longer
// holds (Sink.Send keeps nothing of a batch), for the reader to reuse.
func (s *Shipper) recycle(b *batch) {
	clear(b.records) // drop the lines and labels they point to
	b.records, b.bytes = b.records[:0], 0
	clear(b.ends)
	b.forget, b.finish = b.forget[:0], b.finish[:0]
	select {
	case s.free <- b:
	default:
	}
}

// ordered returns the open files by container dir, oldest generation
// first.
func (s *Shipper) ordered() []*file {
	fs := make([]*file, 0, len(s.files))
	for _, f := range s.files {
		fs = append(fs, f)
	}
	slices.SortFunc(fs, func(a, b *file) int {
		return cmp.Or(strings.Compare(a.dir, b.dir), cmp.Compare(a.seq, b.seq))
	})
	return fs
}

// newGeneration gives f a new generation: a new key and the next place in
// its container's order.
func (s *Shipper) newGeneration(f *file) {
	f.key = newKey(f.inode)
	f.seq = s.nextSeq
	s.nextSeq++
}

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
				cur.Offset, cur.Size = p.Offset, max(cur.Size, p.Size)
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
		for _, p := range b.finish {
			if cur, ok := s.acked[p.Key]; ok {
				cur.Done, cur.Size = true, p.Size
				s.acked[p.Key] = cur
			}
		}
		s.mu.Unlock()
		s.save()
		s.recycle(b)
	}
}

// save writes the acknowledged positions. Saves are serialized and each
// takes its snapshot inside the lock, so the newest state is written last.
func (s *Shipper) save() {
	s.saveMu.Lock()
	defer s.saveMu.Unlock()
	s.mu.Lock()
	s.checkpointBuf = appendCheckpoint(s.checkpointBuf[:0], s.acked)
	s.mu.Unlock()
	if err := saveCheckpoint(s.checkpoint, s.checkpointBuf); err != nil {
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
		changed := cur.Inode != f.inode || cur.Path != f.name || len(f.head) > len(cur.Head) || cur.Seq != f.seq
		cur.Inode, cur.Path, cur.Dir, cur.Seq = f.inode, f.name, f.dir, f.seq
		if len(f.head) > len(cur.Head) {
			cur.Head = f.head
		}
		// The size rides along with the next save; alone it is no reason
		// for one.
		cur.Size = max(cur.Size, f.size)
		s.acked[f.key] = cur
		return changed
	}
	s.acked[f.key] = Position{Key: f.key, Seq: f.seq, Dir: f.dir, Path: f.name, Inode: f.inode, Offset: f.pos, Size: f.size, Head: f.head}
	return true
}

// CheckpointAge is the time since the checkpoint was last written.
func (s *Shipper) CheckpointAge() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cfg.Clock.Since(s.lastCheckpoint)
}
