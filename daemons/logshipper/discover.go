package logshipper

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

var (
	currentLog = regexp.MustCompile(`^[0-9]+\.log$`)
	rotatedLog = regexp.MustCompile(`^[0-9]+\.log\.[^/]+$`)
)

// entry is one log file in a container's dir.
type entry struct {
	name    string
	ino     uint64
	size    int64
	mtime   time.Time
	current bool
}

// listDir returns the live (N.log) and rotated (N.log.<anything but .gz>)
// logs of a container's dir. A file renamed while the dir is read may be
// listed under neither name: a listing in which a name vanished is read
// again (a few times), so that a rotation is not taken for a deletion.
func listDir(dir string) []entry {
	var out []entry
	for range 3 {
		ents, _ := os.ReadDir(dir)
		out = out[:0]
		vanished := false
		for _, e := range ents {
			name := e.Name()
			current := currentLog.MatchString(name)
			if !current && (!rotatedLog.MatchString(name) || strings.HasSuffix(name, ".gz")) {
				continue
			}
			fi, err := e.Info()
			if err != nil {
				vanished = true
				continue
			}
			out = append(out, entry{name: name, ino: fi.Sys().(*syscall.Stat_t).Ino, size: fi.Size(), mtime: fi.ModTime(), current: current})
		}
		if !vanished {
			break
		}
	}
	return out
}

// inDir reports whether a file of dir has inode ino, from a new listing:
// before a generation is taken for gone, its dir is read once more.
func inDir(dir string, ino uint64) bool {
	return slices.ContainsFunc(listDir(dir), func(e entry) bool { return e.ino == ino })
}

// discover opens new files and generations, notices renamed, deleted and
// truncated ones, reports generations gone before they were read, and
// closes the ones that are finished.
func (s *Shipper) discover(b *batch) {
	// The first run writes its checkpoint at once: were it killed before
	// anything else was saved, the next run must not take the rotated
	// files written meanwhile for ones older than the shipper.
	registered := s.firstRun
	defer func() {
		s.firstRun = false
		if registered {
			s.save()
		}
	}()
	seen := map[uint64]string{} // inode -> path
	pods, _ := os.ReadDir(s.cfg.Root)
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
			if cd.IsDir() && s.scanDir(filepath.Join(s.cfg.Root, pd.Name(), cd.Name()), parts, cd.Name(), seen, b) {
				registered = true
			}
		}
	}
	now := s.cfg.Clock.Now()
	for ino, f := range s.files {
		path, ok := seen[ino]
		if !ok && inDir(f.dir, ino) {
			continue // missed by a listing racing a rename: next scan
		}
		if ok && currentLog.MatchString(filepath.Base(path)) {
			continue // the live file: scanDir checked it
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
		if !finished && !expired {
			continue
		}
		end := f.pos - int64(len(f.buf)) // the last line's end
		if fi, err := f.f.Stat(); err == nil {
			f.size = max(f.size, fi.Size())
		}
		f.f.Close()
		delete(s.files, ino)
		s.metrics.lag.DeleteLabelValues(f.ns, f.pod, f.container)
		switch {
		case !finished:
			s.metrics.abandoned.Inc()
			s.gap(b, f.dir, f.name, ino, end, f.size, "deleted, and given up on after the deleted-file grace")
			b.forget = append(b.forget, f.key)
		case f.deleted:
			b.forget = append(b.forget, f.key)
		default:
			// Kept while it is on disk: not an unread generation.
			p := f.position(end)
			p.Size, p.Done = f.pos, true
			s.done[ino] = p
			b.finish = append(b.finish, p)
		}
	}
	// Generations of the checkpoint that are nowhere: read to their end,
	// or lost before they were.
	for ino, p := range s.saved {
		if _, ok := seen[ino]; !ok && !inDir(p.Dir, ino) {
			delete(s.saved, ino)
			if !p.Done {
				s.gap(b, p.Dir, p.Path, p.Inode, p.Offset, p.Size, "gone before it was read to its end")
			}
			b.forget = append(b.forget, p.Key)
		}
	}
	for ino, p := range s.done {
		if _, ok := seen[ino]; !ok && !inDir(p.Dir, ino) {
			delete(s.done, ino)
			b.forget = append(b.forget, p.Key)
		}
	}
}

// scanDir matches a container's files to the generations it knows, opens
// the ones it does not (rotated first, oldest first, then the live file),
// and checks the live file for copytruncate. It reports whether the
// checkpoint needs saving.
func (s *Shipper) scanDir(dir string, pod []string, ctr string, seen map[uint64]string, b *batch) bool {
	registered := false
	var live []entry
	for _, e := range listDir(dir) {
		seen[e.ino] = filepath.Join(dir, e.name)
		if f, ok := s.files[e.ino]; ok {
			if f.name != e.name {
				// Renamed: the checkpoint learns where it lives now.
				f.name = e.name
				if s.register(f) {
					registered = true
				}
			}
			continue
		}
		p, known := s.saved[e.ino]
		if known {
			delete(s.saved, e.ino)
		} else if p, known = s.done[e.ino]; known {
			delete(s.done, e.ino)
		}
		if known && !p.Done && p.Offset == 0 && len(p.Head) == 0 {
			// Nothing of it read and nothing to know it by: as good as
			// unknown, and ordered as such.
			b.forget = append(b.forget, p.Key)
			known = false
		}
		if known {
			same := s.sameFile(dir, e, p)
			if p.Done && same && e.size <= max(p.Size, p.Offset) {
				s.done[e.ino] = p // read, and not grown since
				continue
			}
			if !p.Done || same {
				// Ours to finish: from where it was acknowledged, or, if
				// it was truncated or its inode reused, from its copy.
				if s.resume(dir, e, p, pod, ctr, b) {
					registered = true
				}
				continue
			}
			b.forget = append(b.forget, p.Key) // a done file's inode, reused
		}
		if e.current {
			live = append(live, e)
		}
	}
	if s.fresh(dir, pod, ctr, seen, b) {
		registered = true
	}
	for _, e := range live {
		f, err := s.open(dir, e.name, e.ino, pod, ctr)
		if err != nil {
			s.log.Warn("cannot open log", "file", filepath.Join(dir, e.name), "err", err)
			continue
		}
		s.newGeneration(f)
		f.captureHead()
		s.files[e.ino] = f
		s.register(f)
		registered = true
	}
	for _, f := range s.ordered() {
		if f.dir != dir || f.rotated || seen[f.inode] != filepath.Join(dir, f.name) || !currentLog.MatchString(f.name) {
			continue
		}
		f.captureHead()
		if s.register(f) { // a new head or name to persist
			registered = true
		}
		fi, err := f.f.Stat()
		if err != nil {
			continue
		}
		if fi.Size() < f.pos || !f.headMatches() {
			s.log.Info("file truncated; reading its copy, then the file from the start", "file", filepath.Join(dir, f.name))
			s.truncated(f, f.pos-int64(len(f.buf)), false, b)
			registered = true
			continue
		}
		f.size = max(f.size, fi.Size())
		s.metrics.lag.WithLabelValues(f.ns, f.pod, f.container).Set(float64(fi.Size() - f.pos))
	}
	return registered
}

// resume opens a file the checkpoint knows, at its acknowledged offset.
func (s *Shipper) resume(dir string, e entry, p Position, pod []string, ctr string, b *batch) bool {
	f, err := s.open(dir, e.name, e.ino, pod, ctr)
	if err != nil {
		s.log.Warn("cannot open log", "file", filepath.Join(dir, e.name), "err", err)
		s.saved[e.ino] = p // try again at the next scan
		return false
	}
	f.key, f.seq, f.head, f.size = p.Key, p.Seq, p.Head, max(p.Size, p.Offset)
	if f.seq == 0 { // a checkpoint written before generations were ordered
		f.seq = s.nextSeq
		s.nextSeq++
	}
	s.files[e.ino] = f
	if p.Offset <= e.size && f.headMatches() {
		f.pos = p.Offset
		f.size = max(f.size, e.size)
		s.log.Info("resuming a generation from its checkpoint", "file", filepath.Join(dir, e.name), "generation", p.Key, "offset", p.Offset, "size", e.size)
	} else {
		s.log.Info("a generation of the checkpoint changed while the shipper was down", "file", filepath.Join(dir, e.name), "generation", p.Key, "offset", p.Offset, "size", e.size)
		// Truncated and rewritten while we were down (the lines after
		// our position are in the copy), or the inode now holds another
		// file (the generation is gone).
		s.truncated(f, p.Offset, true, b)
	}
	s.register(f)
	return true
}

// fresh opens the rotated files of dir that hold a generation never seen:
// written and rotated while the shipper was stopped, slow or dead. They
// are read from their start, oldest (least recently written) first. A
// rotated file whose first bytes are those of a generation already known
// is a copy of it (copytruncate), not a new one. seen, when set, gets the
// files opened.
func (s *Shipper) fresh(dir string, pod []string, ctr string, seen map[uint64]string, b *batch) bool {
	known := s.knownHeads(dir)
	type found struct {
		f *file
		e entry
	}
	var fs []found
	for _, e := range listDir(dir) {
		if _, ok := s.files[e.ino]; ok || e.current || e.size == 0 {
			continue
		}
		if _, ok := s.done[e.ino]; ok {
			continue
		}
		if _, ok := s.saved[e.ino]; ok {
			continue
		}
		f, err := s.open(dir, e.name, e.ino, pod, ctr)
		if err != nil {
			continue
		}
		head := f.readHead()
		if slices.ContainsFunc(known, func(k []byte) bool { return sameHead(k, head) }) {
			f.f.Close()
			continue
		}
		known = append(known, head)
		f.head = head
		fs = append(fs, found{f, e})
	}
	slices.SortFunc(fs, func(a, b found) int { return olderFirst(a.e, b.e) })
	now := s.cfg.Clock.Now()
	for _, x := range fs {
		f, e := x.f, x.e
		if seen != nil {
			seen[e.ino] = filepath.Join(dir, e.name)
		}
		s.newGeneration(f)
		if s.firstRun {
			// Older than this node's shipper: not ours to ship. Remembered
			// as done, so that it is never taken for a new generation.
			f.f.Close()
			p := Position{Key: f.key, Seq: f.seq, Dir: dir, Path: e.name, Inode: e.ino, Offset: e.size, Size: e.size, Head: f.head, Done: true}
			s.done[e.ino] = p
			s.mu.Lock()
			s.acked[p.Key] = p
			s.mu.Unlock()
			s.log.Info("rotated log older than the shipper's first run; not shipped", "file", filepath.Join(dir, e.name), "bytes", e.size)
			continue
		}
		f.size, f.rotated, f.rotatedAt = e.size, true, now
		s.files[e.ino] = f
		s.register(f)
		s.log.Info("reading a rotated generation never seen before", "file", filepath.Join(dir, e.name), "bytes", e.size)
	}
	return len(fs) > 0
}

// olderFirst orders two rotated files of one dir, the older generation
// first: by modification time, and where that cannot tell them apart, by
// name. A file's mtime has the kernel's tick (a few milliseconds), so two
// rotations within one tick leave equal times. Names then order them as
// their rotator meant: logrotate numbers its copies from the newest
// (0.log.1 is newer than 0.log.2), and kubelet stamps its renames with the
// time of the rotation (0.log.20261128-010001 is older than …-010002).
func olderFirst(a, b entry) int {
	if c := a.mtime.Compare(b.mtime); c != 0 {
		return c
	}
	an, aok := copyNumber(a.name)
	bn, bok := copyNumber(b.name)
	if aok && bok {
		return cmp.Compare(bn, an)
	}
	return strings.Compare(a.name, b.name)
}

// copyNumber is the n of a logrotate-style numbered copy, N.log.n.
func copyNumber(name string) (int, bool) {
	i := strings.LastIndexByte(name, '.')
	suffix := name[i+1:]
	if i < 0 || suffix == "" || len(suffix) > 6 || strings.Trim(suffix, "0123456789") != "" {
		return 0, false
	}
	n, err := strconv.Atoi(suffix)
	return n, err == nil
}

// knownHeads are the first bytes of every generation of dir the shipper
// knows: open, done, or in the checkpoint and not found yet.
func (s *Shipper) knownHeads(dir string) [][]byte {
	var out [][]byte
	for _, f := range s.files {
		if f.dir == dir && len(f.head) > 0 {
			out = append(out, f.head)
		}
	}
	for _, m := range []map[uint64]Position{s.done, s.saved} {
		for _, p := range m {
			if p.Dir == dir && len(p.Head) > 0 {
				out = append(out, p.Head)
			}
		}
	}
	return out
}

// sameHead reports whether two heads are of one generation: one is a
// prefix of the other (a head is captured while the file is short).
func sameHead(a, b []byte) bool {
	if len(a) == 0 || len(b) == 0 {
		return false
	}
	n := min(len(a), len(b))
	return bytes.Equal(a[:n], b[:n])
}

// sameFile reports whether e is still the file p was read from: the same
// inode, at least as long, starting with the same bytes (an inode is
// reused once a file is deleted).
func (s *Shipper) sameFile(dir string, e entry, p Position) bool {
	if e.ino != p.Inode || e.size < p.Offset {
		return false
	}
	if len(p.Head) == 0 {
		return true
	}
	fh, err := os.Open(filepath.Join(dir, e.name))
	if err != nil {
		return false
	}
	defer fh.Close()
	got := make([]byte, len(p.Head))
	n, _ := fh.ReadAt(got, 0)
	return n == len(got) && bytes.Equal(got, p.Head)
}

func (s *Shipper) open(dir, name string, ino uint64, podParts []string, container string) (*file, error) {
	fh, err := os.Open(filepath.Join(dir, name))
	if err != nil {
		return nil, fmt.Errorf("open the log of container %s: %w", container, err)
	}
	fi, err := fh.Stat()
	if err != nil || fi.Sys().(*syscall.Stat_t).Ino != ino {
		fh.Close()
		return nil, errFileChanged
	}
	return &file{dir: dir, name: name, ns: podParts[0], pod: podParts[1], uid: podParts[2], container: container,
		inode: ino, f: fh, buf: make([]byte, 0, 32<<10)}, nil
}

// position is where f stands, acknowledged or not, at offset.
func (f *file) position(offset int64) Position {
	return Position{Key: f.key, Seq: f.seq, Dir: f.dir, Path: f.name, Inode: f.inode, Offset: offset, Size: max(f.size, f.pos), Head: f.head}
}

// truncated handles a copytruncate of f: the copy (a rotated name in the
// same dir starting with f's head) is read from offset, the position up to
// which f was parsed, and f from its start as a new generation. With no
// copy, the bytes of f's generation not read are reported lost; so is the
// generation itself when it was not watched (unseen: found truncated, or
// its inode reused, at a restart), even with no byte known unread: what
// it gained while the shipper was down is gone.
func (s *Shipper) truncated(f *file, offset int64, unseen bool, b *batch) {
	s.metrics.truncations.Inc()
	end := max(f.size, f.pos)
	var c *file
	if len(f.head) > 0 {
		c = s.findCopy(f.dir, f.head, offset)
	}
	if c != nil {
		// The copy carries on f's generation.
		c.pos, c.head, c.rotated, c.rotatedAt, c.key, c.seq = offset, f.head, true, s.cfg.Clock.Now(), f.key, f.seq
		c.partial, c.partialTrunc = f.partial, f.partialTrunc
		if fi, err := c.f.Stat(); err == nil {
			c.size = fi.Size()
		}
		s.files[c.inode] = c
		s.register(c)
		if end > c.size {
			// Written after the copy was taken and before the truncation.
			s.gap(b, f.dir, f.name, f.inode, c.size, end, "truncated after its copy was taken")
		}
	} else {
		if end > offset || unseen {
			s.gap(b, f.dir, f.name, f.inode, offset, end, "truncated, and no copy of it found")
		}
		b.forget = append(b.forget, f.key)
	}
	// Generations rotated away before this one was noticed come first.
	s.fresh(f.dir, []string{f.ns, f.pod, f.uid}, f.container, nil, b)
	f.pos, f.buf, f.partial, f.partialTrunc, f.skipping, f.head, f.size = 0, f.buf[:0], nil, false, false, nil, 0
	s.newGeneration(f)
	// The new generation's head at once, if it has one: a checkpoint with
	// no head cannot tell this generation from the next.
	f.captureHead()
	s.register(f)
}

// findCopy opens an untracked rotated file of dir that starts with head and
// is longer than offset.
func (s *Shipper) findCopy(dir string, head []byte, offset int64) *file {
	pod := strings.SplitN(filepath.Base(filepath.Dir(dir)), "_", 3)
	if len(pod) != 3 {
		return nil
	}
	for _, e := range listDir(dir) {
		if e.current || e.size < offset {
			continue
		}
		if _, tracked := s.files[e.ino]; tracked {
			continue
		}
		if _, done := s.done[e.ino]; done {
			continue
		}
		if _, saved := s.saved[e.ino]; saved {
			continue
		}
		c, err := s.open(dir, e.name, e.ino, pod, filepath.Base(dir))
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

// readHead returns the file's first bytes (up to headLen).
func (f *file) readHead() []byte {
	head := make([]byte, headLen)
	n, _ := f.f.ReadAt(head, 0)
	return head[:n]
}

// captureHead remembers the file's first bytes (up to headLen) once the
// file has them, extending a short head only while it is still a prefix.
func (f *file) captureHead() bool {
	if len(f.head) >= headLen || f.rotated {
		return false
	}
	head := f.readHead()
	if len(head) > len(f.head) && bytes.HasPrefix(head, f.head) {
		f.head = head
		return true
	}
	return false
}

// headMatches reports whether the file still starts with the bytes it
// started with when first read. A file now shorter than its head does not:
// a generation only grows, so it was truncated (to nothing, or to a new
// generation's first short line). Only a failed read, which says nothing
// either way, counts as a match.
func (f *file) headMatches() bool {
	if len(f.head) == 0 {
		return true
	}
	var buf [headLen]byte // on the stack: every read checks
	cur := buf[:len(f.head)]
	n, err := f.f.ReadAt(cur, 0)
	if n < len(f.head) {
		return err != nil && !errors.Is(err, io.EOF)
	}
	return bytes.Equal(cur, f.head)
}
