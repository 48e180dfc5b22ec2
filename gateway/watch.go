package gateway

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"time"

	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trellis-dev/trellis/gateway/api"
)

// watch streams a namespace's workload changes as server-sent events, from
// the cache's informers: the current workloads first (ADDED), then each
// change. A client too slow to keep up is disconnected (it reconnects and
// gets the current state again) rather than buffered without bound.
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
	flusher, ok := w.(http.Flusher)
	if !ok {
		q.fail(http.StatusInternalServerError, "Internal", "streaming unsupported", nil)
		return
	}
	events := make(chan api.WatchEvent, 1024)
	overflow := make(chan struct{})
	var once sync.Once
	send := func(typ string, k workloadKind, obj any) {
		if u, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
			obj = u.Obj
		}
		o, ok := obj.(client.Object)
		if !ok || o.GetNamespace() != ns {
			return
		}
		select {
		case events <- api.WatchEvent{Type: typ, Workload: summary(k, o)}:
		default:
			once.Do(func() { close(overflow) })
		}
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
		case e := <-events:
			b, _ := json.Marshal(e)
			fmt.Fprintf(w, "event: %s\ndata: %s\n\n", e.Type, b)
			flusher.Flush()
		}
	}
}
