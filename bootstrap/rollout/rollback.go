package rollout

import (
	"context"
	"errors"
	"fmt"
)

// Rollback is what rolling the last rollout back takes: the image its
// groups ran before it, those groups, and the stopped rollout itself.
type Rollback struct {
	Image  string
	Groups []string
	Prev   *State
}

// RollbackTarget resolves a rollback of the last rollout in store onto the
// previous image of its groups. The rollout must have stopped, and its
// groups must have come from one image.
func RollbackTarget(ctx context.Context, store Store) (Rollback, error) {
	var rb Rollback
	prev, err := store.Load(ctx)
	if err != nil {
		return rb, fmt.Errorf("failed to read the last rollout: %w", err)
	}
	if prev == nil {
		return rb, ErrNoRollout
	}
	if prev.Status == StatusRunning || prev.Status == StatusAborting {
		return rb, fmt.Errorf("rollout %s is %s: abort it and let it stop first", prev.ID, prev.Status)
	}
	if prev.Image == "" {
		return rb, fmt.Errorf("rollout %s (%s) changed no image: there is no image to roll back to", prev.ID, prev.Reason)
	}
	for _, g := range prev.GroupNames() {
		p := prev.Groups[g]
		if p.PrevImage == "" {
			continue
		}
		if rb.Image != "" && rb.Image != p.PrevImage {
			return rb, fmt.Errorf("groups came from different images (%s, %s): roll them back one at a time with --groups", rb.Image, p.PrevImage)
		}
		rb.Image = p.PrevImage
		rb.Groups = append(rb.Groups, g)
	}
	if rb.Image == "" {
		return rb, errors.New("the last rollout recorded no previous image")
	}
	rb.Prev = prev
	return rb, nil
}
