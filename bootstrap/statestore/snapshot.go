package statestore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"

	"k8s.io/kops/util/pkg/vfs"
)

// Snapshot is every file of one cluster in a state store
// (<state>/<cluster>/...: kops's specs, secrets and keysets, Trellis's own
// files) at one moment. A command that writes there takes one first and
// restores it when it fails, so a failure leaves the store byte for byte as
// it was, whatever kops or Trellis had written by then.
type Snapshot struct {
	base  vfs.Path
	files map[string][]byte
}

// Take reads every file under the cluster's folder. A cluster that does not
// exist yet is an empty snapshot (restoring it removes what was written).
func Take(ctx context.Context, stateStore, cluster string) (*Snapshot, error) {
	if cluster == "" || strings.Contains(cluster, "/") {
		return nil, fmt.Errorf("snapshot of the state store: bad cluster name %q", cluster)
	}
	root, err := vfs.Context.BuildVfsPath(stateStore)
	if err != nil {
		return nil, fmt.Errorf("failed to open state store %s: %w", stateStore, err)
	}
	s := &Snapshot{base: root.Join(cluster), files: map[string][]byte{}}
	paths, err := s.list(ctx)
	if err != nil {
		return nil, fmt.Errorf("failed to list %s in state store %s: %w", cluster, stateStore, err)
	}
	for rel, p := range paths {
		data, err := p.ReadFile(ctx)
		if errors.Is(err, os.ErrNotExist) {
			continue // removed meanwhile (memfs lists removed files too)
		}
		if err != nil {
			return nil, fmt.Errorf("snapshot of the state store: failed to read %s: %w", p.Path(), err)
		}
		s.files[rel] = data
	}
	return s, nil
}

// Files lists the snapshot's files, relative to the cluster's folder.
func (s *Snapshot) Files() []string {
	out := make([]string, 0, len(s.files))
	for rel := range s.files {
		out = append(out, rel)
	}
	sort.Strings(out)
	return out
}

// Restore puts the cluster's folder back as it was when the snapshot was
// taken: files written since are removed, changed or removed ones written
// back. It tries every file and reports every one it could not restore.
func (s *Snapshot) Restore(ctx context.Context) error {
	now, err := s.list(ctx)
	if err != nil {
		return fmt.Errorf("failed to restore the state store: %w", err)
	}
	var errs []error
	for rel, p := range now {
		if _, ok := s.files[rel]; ok {
			continue
		}
		if err := p.Remove(ctx); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("failed to remove %s: %w", p.Path(), err))
		}
	}
	for _, rel := range s.Files() {
		p := s.base.Join(rel)
		if cur, err := p.ReadFile(ctx); err == nil && bytes.Equal(cur, s.files[rel]) {
			continue
		}
		if err := p.WriteFile(ctx, bytes.NewReader(s.files[rel]), nil); err != nil {
			errs = append(errs, fmt.Errorf("failed to write back %s: %w", p.Path(), err))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("failed to restore the state store of %s: %w", s.base.Path(), errors.Join(errs...))
	}
	return nil
}

// list returns the files under the cluster's folder by relative path.
func (s *Snapshot) list(ctx context.Context) (map[string]vfs.Path, error) {
	tree, err := s.base.ReadTree(ctx)
	if errors.Is(err, os.ErrNotExist) {
		return map[string]vfs.Path{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("failed to list %s: %w", s.base.Path(), err)
	}
	prefix := strings.TrimSuffix(s.base.Path(), "/") + "/"
	out := make(map[string]vfs.Path, len(tree))
	for _, p := range tree {
		rel, ok := strings.CutPrefix(p.Path(), prefix)
		if !ok || rel == "" {
			return nil, fmt.Errorf("state store listed %s outside %s", p.Path(), s.base.Path())
		}
		out[rel] = p
	}
	return out, nil
}

// Changed lists the files of the cluster's folder that differ from the
// snapshot (added, changed or removed), relative to the folder, sorted.
func (s *Snapshot) Changed(ctx context.Context) ([]string, error) {
	now, err := s.list(ctx)
	if err != nil {
		return nil, err
	}
	var out []string
	for rel, p := range now {
		old, ok := s.files[rel]
		if !ok {
			out = append(out, rel)
			continue
		}
		cur, err := p.ReadFile(ctx)
		if err != nil && !errors.Is(err, os.ErrNotExist) { // memfs lists removed files too
			return nil, fmt.Errorf("failed to read %s: %w", p.Path(), err)
		}
		if err != nil || !bytes.Equal(cur, old) {
			out = append(out, rel)
		}
	}
	for rel := range s.files {
		if _, ok := now[rel]; !ok {
			out = append(out, rel)
		}
	}
	sort.Strings(out)
	return out, nil
}

// Remove deletes every file of a cluster's folder in the state store:
// kops's specs, secrets and keysets, and Trellis's own files. It tries
// every file and reports every one it could not remove.
func Remove(ctx context.Context, stateStore, cluster string) error {
	s, err := Take(ctx, stateStore, cluster)
	if err != nil {
		return err
	}
	s.files = map[string][]byte{}
	if err := s.Restore(ctx); err != nil {
		return fmt.Errorf("failed to remove %s from the state store: %w", cluster, err)
	}
	return nil
}
