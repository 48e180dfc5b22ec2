package gateway

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/trellis-dev/trellis/gateway/api"
)

// routes is the whole HTTP API, in one place (api/routes.go documents
// each route).
func (g *Gateway) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc(api.RouteSubmit, g.submit)
	mux.HandleFunc(api.RouteList, g.list)
	mux.HandleFunc(api.RouteGet, g.get)
	mux.HandleFunc(api.RouteStatus, g.status)
	mux.HandleFunc(api.RouteEvents, g.eventsOf)
	mux.HandleFunc(api.RouteWatch, g.watch)
	mux.HandleFunc(api.RouteQuotas, g.quotas)
	mux.HandleFunc(api.RouteHealthz, func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	mux.HandleFunc(api.RouteReadyz, func(w http.ResponseWriter, r *http.Request) {
		if !g.ready.Load() {
			http.Error(w, "informer cache not synced", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok"))
	})
	mux.Handle(api.RouteMetrics, promhttp.HandlerFor(g.metrics.registry, promhttp.HandlerOpts{}))
	g.mux = mux
	return mux
}

// Mount serves h under prefix (a path ending in "/") beside the API, on
// the same HTTPS server: the web console. Call it before Run.
func (g *Gateway) Mount(prefix string, h http.Handler) {
	g.mux.Handle(prefix, h)
}
