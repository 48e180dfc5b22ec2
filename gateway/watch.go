package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trellis-dev/trellis/gateway/api"
)

// watch streams a namespace's workload changes as server-sent events, from
// the cache's informers: the current workloads first (ADDED), then each
// change. A caller who may list events in the namespace gets each
// workload's last event with it, as in a list, and a MODIFIED when a new
// event about a workload arrives; one who may not gets the refusal in
// eventsHidden. A client too slow to keep up is disconnected (it
// reconnects and gets the current state again) rather than buffered
// without bound.
func (g *Gateway) watch(w http.ResponseWriter, r *http.Request) {
	q := g.newRequest(w, r, "watch")
	if !q.authenticate() {
		return
	}
	ns := r.PathValue("namespace")
	ks, ok := q.authorizedKinds(ns, "watch")
	if !ok {
		return
	}
	hidden, ok := q.eventsShown(ns)
	if !ok {
		return
	}
	flusher, ok := w.(http.Flusher)
	if !ok {
		q.fail(http.StatusInternalServerError, "Internal", "streaming unsupported", nil)
		return
	}
	changes := make(chan change, 1024)
	overflow := make(chan struct{})
	var once sync.Once
	queue := func(c change) {
		select {
		case changes <- c:
		default:
			once.Do(func() { close(overflow) })
		}
	}
	send := func(typ string, k workloadKind, obj any) {
		if u, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
			obj = u.Obj
		}
		o, ok := obj.(client.Object)
		if !ok || o.GetNamespace() != ns {
			return
		}
		queue(change{typ: typ, k: k, obj: o})
	}
	for _, k := range ks {
		inf, err := g.cache.GetInformer(r.Context(), k.New())
		if err != nil {
			q.fail(http.StatusServiceUnavailable, "Unavailable", err.Error(), nil)
			return
		}
		reg, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { send(api.WatchAdded, k, obj) },
			UpdateFunc: func(_, obj any) { send(api.WatchModified, k, obj) },
			DeleteFunc: func(obj any) { send(api.WatchDeleted, k, obj) },
		})
		if err != nil {
			q.fail(http.StatusServiceUnavailable, "Unavailable", err.Error(), nil)
			return
		}
		defer func() { _ = inf.RemoveEventHandler(reg) }()
	}
	if hidden == "" {
		// A new or repeated event changes its workload's last event.
		about := func(obj any) {
			e, ok := obj.(*corev1.Event)
			if !ok || e.Namespace != ns {
				return
			}
			for _, k := range ks {
				if k.Kind == e.InvolvedObject.Kind {
					queue(change{typ: api.WatchModified, k: k, key: client.ObjectKey{Namespace: ns, Name: e.InvolvedObject.Name}})
				}
			}
		}
		inf, err := g.cache.GetInformer(r.Context(), &corev1.Event{})
		if err != nil {
			q.fail(http.StatusServiceUnavailable, "Unavailable", err.Error(), nil)
			return
		}
		// The events already there are in the workloads' ADDED: only new
		// ones are sent.
		reg, err := inf.AddEventHandler(toolscache.ResourceEventHandlerDetailedFuncs{
			AddFunc: func(obj any, initial bool) {
				if !initial {
					about(obj)
				}
			},
			UpdateFunc: func(_, obj any) { about(obj) },
		})
		if err != nil {
			q.fail(http.StatusServiceUnavailable, "Unavailable", err.Error(), nil)
			return
		}
		defer func() { _ = inf.RemoveEventHandler(reg) }()
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	flusher.Flush()
	q.rec.Decision = "accepted"
	q.done = true
	defer q.finish(http.StatusOK)
	heartbeat := time.NewTicker(15 * time.Second)
	defer heartbeat.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-overflow:
			return
		case <-heartbeat.C:
			fmt.Fprint(w, ": heartbeat\n\n")
			flusher.Flush()
		case c := <-changes:
			e, ok := g.watchEvent(r.Context(), c, hidden)
			if !ok {
				continue
			}
			b, _ := json.Marshal(e)
			fmt.Fprintf(w, "event: %s\ndata: %s\n\n", e.Type, b)
			flusher.Flush()
		}
	}
}

// change is a workload to send: obj itself, or (an event about it) the
// one at key, read from the cache when it is sent.
type change struct {
	typ string
	k   workloadKind
	obj client.Object
	key client.ObjectKey
}

// watchEvent is the server-sent event of c, with the workload's last event
// unless events are hidden (then the refusal) or it was deleted. Read in
// the stream's goroutine, not the informer's; false when c names a
// workload the cache no longer holds. A failed read of the events leaves
// the last event out: the next change carries it.
func (g *Gateway) watchEvent(ctx context.Context, c change, hidden string) (api.WatchEvent, bool) {
	o := c.obj
	if o == nil {
		o = c.k.New()
		if err := g.cache.Get(ctx, c.key, o); err != nil {
			return api.WatchEvent{}, false
		}
	}
	e := api.WatchEvent{Type: c.typ, Workload: summary(c.k, o), EventsHidden: hidden}
	if hidden == "" && c.typ != api.WatchDeleted {
		e.Workload.LastEvent, _ = g.lastEvent(ctx, c.k, o)
	}
	return e, true
}
