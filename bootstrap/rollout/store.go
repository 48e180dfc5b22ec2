package rollout

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"k8s.io/kops/util/pkg/vfs"
)

var jsonMarshal = json.Marshal

// VFSStore keeps the state in the kops state store, beside the cluster:
// <state>/<cluster>/trellis/ami-rollout.json, and the history of finished
// rollouts beside it in ami-rollout-history.json.
type VFSStore struct{ Path, HistoryPath vfs.Path }

// NewVFSStore opens the state of cluster in the state store at url.
func NewVFSStore(url, cluster string) (*VFSStore, error) {
	base, err := vfs.Context.BuildVfsPath(url)
	if err != nil {
		return nil, fmt.Errorf("failed to open state store %s: %w", url, err)
	}
	dir := base.Join(cluster, "trellis")
	return &VFSStore{Path: dir.Join("ami-rollout.json"), HistoryPath: dir.Join("ami-rollout-history.json")}, nil
}

// Load reads the state; (nil, nil) when there is none.
func (s *VFSStore) Load(ctx context.Context) (*State, error) {
	b, err := s.Path.ReadFile(ctx)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("failed to read %s: %w", s.Path, err)
	}
	var st State
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, fmt.Errorf("corrupt rollout state %s: %w", s.Path, err)
	}
	return &st, nil
}

// Save writes the state (vfs writes whole objects: S3 puts, file renames).
func (s *VFSStore) Save(ctx context.Context, st *State) error {
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return fmt.Errorf("failed to encode rollout state %s: %w", s.Path, err)
	}
	return s.Path.WriteFile(ctx, bytes.NewReader(b), nil)
}
