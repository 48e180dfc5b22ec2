package vpc

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/trellis-dev/trellis/internal/fsync"
)

// Assignment is one pod's address: the pool records it on disk before the
// CNI plugin is told, so a restart knows it.
type Assignment struct {
	// Container and Iface are the CNI's keys (the sandbox's id and its
	// interface name); Pod is "namespace/name".
	Container string     `json:"container"`
	Iface     string     `json:"iface"`
	Pod       string     `json:"pod"`
	IP        netip.Addr `json:"ip"`
	ENI       string     `json:"eni"`
	// Device is the ENI's device index: its route table is Device+1.
	Device int       `json:"device"`
	Since  time.Time `json:"since"`
}

func (a *Assignment) key() string { return a.Container + "/" + a.Iface }

// checkpointVersion changes when the file's meaning does.
const checkpointVersion = 1

type checkpoint struct {
	Version     int           `json:"version"`
	Instance    string        `json:"instance"`
	Assignments []*Assignment `json:"assignments"`
}

// loadCheckpoint reads the assignments recorded for instance; a missing
// file is an empty one, and so is one written on another instance (a
// reused root volume).
func loadCheckpoint(path, instance string) ([]*Assignment, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("failed to read the address checkpoint: %w", err)
	}
	var c checkpoint
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("address checkpoint %s: %w", path, err)
	}
	if c.Version != checkpointVersion {
		return nil, fmt.Errorf("address checkpoint %s: version %d, this netd reads %d", path, c.Version, checkpointVersion)
	}
	if c.Instance != instance {
		return nil, nil
	}
	return c.Assignments, nil
}

// saveCheckpoint replaces the file atomically and durably.
func saveCheckpoint(path, instance string, used map[netip.Addr]*Assignment) error {
	c := checkpoint{Version: checkpointVersion, Instance: instance, Assignments: make([]*Assignment, 0, len(used))}
	for _, a := range used {
		c.Assignments = append(c.Assignments, a)
	}
	sort.Slice(c.Assignments, func(i, j int) bool { return c.Assignments[i].IP.Less(c.Assignments[j].IP) })
	b, err := json.MarshalIndent(c, "", " ")
	if err != nil {
		return fmt.Errorf("encode the address checkpoint: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("failed to save the address checkpoint: %w", err)
	}
	if err := fsync.Replace(path, b, 0o600); err != nil {
		return fmt.Errorf("failed to save the address checkpoint: %w", err)
	}
	return nil
}
