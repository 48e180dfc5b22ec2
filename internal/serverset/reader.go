package serverset

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"sort"

	"github.com/go-zookeeper/zk"

	"github.com/trellis-dev/trellis/internal/fsync"
)

// ErrShrinkRefused is returned when an update would drop a serverset of at
// least MinGuardedSize members below half: a partial ZooKeeper view must not
// wipe a serverset clients depend on.
var ErrShrinkRefused = errors.New("refusing serverset update that drops below 50% of current members")

// MinGuardedSize is the smallest serverset the shrink guard protects.
const MinGuardedSize = 5

// Read returns the members of a serverset directory, sorted by znode name.
func Read(conn *zk.Conn, dir string) ([]Member, error) {
	members, _, err := readW(conn, dir, false)
	return members, err
}

func readW(conn *zk.Conn, dir string, watch bool) ([]Member, <-chan zk.Event, error) {
	var names []string
	var ch <-chan zk.Event
	var err error
	if watch {
		names, _, ch, err = conn.ChildrenW(dir)
	} else {
		names, _, err = conn.Children(dir)
	}
	if errors.Is(err, zk.ErrNoNode) {
		if watch {
			_, _, ch, err = conn.ExistsW(dir)
			if err != nil {
				return nil, nil, fmt.Errorf("watch for %s to appear: %w", dir, err)
			}
			return nil, ch, nil
		}
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("failed to list %s: %w", dir, err)
	}
	sort.Strings(names)
	out := make([]Member, 0, len(names))
	for _, n := range names {
		data, _, err := conn.Get(path.Join(dir, n))
		if errors.Is(err, zk.ErrNoNode) {
			continue // left between list and get
		}
		if err != nil {
			return nil, nil, fmt.Errorf("failed to read %s/%s: %w", dir, n, err)
		}
		m, err := ParseMember(data)
		if err != nil {
			continue // not a member znode
		}
		out = append(out, m)
	}
	return out, ch, nil
}

// Watch calls update with the serverset's members now and after every
// change, until ctx ends.
func Watch(ctx context.Context, conn *zk.Conn, dir string, update func([]Member) error) error {
	for {
		members, ch, err := readW(conn, dir, true)
		if err != nil {
			return err
		}
		if err := update(members); err != nil && !errors.Is(err, ErrShrinkRefused) {
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-ch:
		}
	}
}

// FileWriter writes a serverset to a local file atomically (fsync.Replace),
// refusing updates the shrink guard rejects.
type FileWriter struct {
	Path    string
	current int
	loaded  bool
}

// Write replaces the file's members, unless the guard refuses.
func (w *FileWriter) Write(members []Member) error {
	if !w.loaded {
		w.loaded = true
		if b, err := os.ReadFile(w.Path); err == nil {
			var old []Member
			if json.Unmarshal(b, &old) == nil {
				w.current = len(old)
			}
		}
	}
	if w.current >= MinGuardedSize && len(members)*2 < w.current {
		return fmt.Errorf("%s: %d -> %d members: %w", w.Path, w.current, len(members), ErrShrinkRefused)
	}
	b, err := json.MarshalIndent(members, "", "  ")
	if err != nil {
		return fmt.Errorf("encode the members: %w", err)
	}
	if err := fsync.Replace(w.Path, append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("failed to replace %s: %w", w.Path, err)
	}
	w.current = len(members)
	return nil
}
