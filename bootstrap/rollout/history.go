package rollout

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"
)

// HistoryLimit is how many finished rollouts the history keeps.
const HistoryLimit = 20

// Record is a finished rollout as the history keeps it: what it changed,
// when, how it ended and which run ended it. No node names, no secrets.
type Record struct {
	ID      string `json:"id"`
	Cluster string `json:"cluster"`
	// From are the images the groups ran before, To the images they run
	// after (comma-separated when groups differ); Reason says why when
	// the rollout changed no image (a relaunch for an upgrade).
	From   string   `json:"from,omitempty"`
	To     string   `json:"to,omitempty"`
	Reason string   `json:"reason,omitempty"`
	Groups []string `json:"groups"`
	// Replaced of Total old nodes were replaced.
	Replaced int       `json:"replaced"`
	Total    int       `json:"total"`
	Started  time.Time `json:"started,omitzero"`
	Finished time.Time `json:"finished"`
	// Outcome is Done or Aborted.
	Outcome Status `json:"outcome"`
	Message string `json:"message,omitempty"`
	// Run is the run that finished it (host/pid), or the abort request
	// that ended it with no run holding it.
	Run string `json:"run,omitempty"`
}

// History is the history file: newest first, at most HistoryLimit.
type History struct {
	Rollouts []Record `json:"rollouts"`
}

// Historian is a Store that also keeps the history of finished rollouts;
// VFSStore is one. The engine and Request record a rollout in it when it
// ends (Done or Aborted).
type Historian interface {
	History(ctx context.Context) ([]Record, error)
	Record(ctx context.Context, rec Record) error
}

var _ Historian = (*VFSStore)(nil)

// finished reports whether a status ends a rollout.
func finished(s Status) bool { return s == StatusDone || s == StatusAborted }

// NewRecord is the history's record of st, finished at at by run.
func NewRecord(st *State, at time.Time, run string) Record {
	rec := Record{ID: st.ID, Cluster: st.Cluster, Reason: st.Reason, Started: st.Started, Finished: at,
		Outcome: st.Status, Message: st.Message, Run: run, Groups: st.GroupNames()}
	rec.Replaced, rec.Total = st.replaced()
	var from, to []string
	for _, name := range rec.Groups {
		g := st.Groups[name]
		if g.PrevImage != "" && !slices.Contains(from, g.PrevImage) {
			from = append(from, g.PrevImage)
		}
		if g.ImageID != "" && !slices.Contains(to, g.ImageID) {
			to = append(to, g.ImageID)
		}
		if rec.Started.IsZero() || (!g.Started.IsZero() && g.Started.Before(rec.Started)) {
			rec.Started = g.Started
		}
	}
	rec.From, rec.To = strings.Join(from, ", "), strings.Join(to, ", ")
	if rec.To == "" {
		rec.To = st.Image
	}
	return rec
}

// record adds a finished rollout to the store's history, when the store
// keeps one; anything else is not recorded.
func record(ctx context.Context, store Store, st *State, at time.Time, run string) error {
	h, ok := store.(Historian)
	if !ok || !finished(st.Status) {
		return nil
	}
	if err := h.Record(context.WithoutCancel(ctx), NewRecord(st, at, run)); err != nil {
		return fmt.Errorf("rollout %s %s, but failed to record it in the history: %w", st.ID, st.Status, err)
	}
	return nil
}

// History reads the finished rollouts, newest first; none when there is
// no history file yet.
func (s *VFSStore) History(ctx context.Context) ([]Record, error) {
	if s.HistoryPath == nil {
		return nil, errors.New("the rollout store has no history path (open it with NewVFSStore)")
	}
	b, err := s.HistoryPath.ReadFile(ctx)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("failed to read %s: %w", s.HistoryPath, err)
	}
	var h History
	if err := json.Unmarshal(b, &h); err != nil {
		return nil, fmt.Errorf("corrupt rollout history %s: %w", s.HistoryPath, err)
	}
	return h.Rollouts, nil
}

// Record puts rec first in the history, replacing an earlier record of
// the same rollout (a run killed between writing the history and the
// state finishes it again), and keeps the newest HistoryLimit. The file is
// written whole (S3 puts, file renames): never half-written. A corrupt
// history is refused, not overwritten.
func (s *VFSStore) Record(ctx context.Context, rec Record) error {
	old, err := s.History(ctx)
	if err != nil {
		return err
	}
	h := History{Rollouts: []Record{rec}}
	for _, r := range old {
		if r.ID != rec.ID && len(h.Rollouts) < HistoryLimit {
			h.Rollouts = append(h.Rollouts, r)
		}
	}
	b, err := json.MarshalIndent(h, "", "  ")
	if err != nil {
		return fmt.Errorf("failed to encode the rollout history with %s: %w", rec.ID, err)
	}
	if err := s.HistoryPath.WriteFile(ctx, bytes.NewReader(b), nil); err != nil {
		return fmt.Errorf("failed to write %s: %w", s.HistoryPath, err)
	}
	return nil
}
