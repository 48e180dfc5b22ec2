package gateway

import (
	"context"
	"errors"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trellis-dev/trellis/gateway/api"
)

// eventsShown asks, as the caller, whether it may list events in
// namespace, so that a workload list carries each workload's last event.
// A refusal is not an error: hidden is the refusal, for the list to say
// why it shows no events. ok is false when the review itself failed (the
// answer, 503, is written).
func (q *request) eventsShown(namespace string) (hidden string, ok bool) {
	err := q.coreAccess(namespace, "events", "list")
	switch {
	case err == nil:
		return "", true
	case errors.Is(err, ErrForbidden):
		return err.Error(), true
	}
	q.authzFailed(err)
	return "", false
}

// lastEvent is the workload's most recent event from the cache, or nil.
func (g *Gateway) lastEvent(ctx context.Context, k workloadKind, obj client.Object) (*api.Event, error) {
	ev, err := g.events(ctx, k, obj)
	if err != nil || len(ev) == 0 {
		return nil, err
	}
	return &ev[len(ev)-1], nil
}

// annotatedTime parses an RFC 3339 annotation value; zero when empty or
// malformed (a pod's annotations are anyone's to write).
func annotatedTime(v string) time.Time {
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return time.Time{}
	}
	return t.UTC()
}
