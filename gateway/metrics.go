package gateway

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

type metrics struct {
	registry    *prometheus.Registry
	requests    *prometheus.CounterVec
	submissions *prometheus.CounterVec
	latency     *prometheus.HistogramVec
	overhead    *prometheus.HistogramVec
}

func newMetrics() *metrics {
	m := &metrics{
		registry: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "trellis_gateway_requests_total", Help: "Requests by action and HTTP code.",
		}, []string{"action", "code"}),
		submissions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "trellis_gateway_submissions_total", Help: "Submissions by result (created, updated, unchanged, replayed, refused, failed).",
		}, []string{"result"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "trellis_gateway_request_seconds", Help: "Request latency by action.",
			Buckets: []float64{.001, .0025, .005, .01, .02, .05, .1, .25, .5, 1, 2.5},
		}, []string{"action"}),
		overhead: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "trellis_gateway_overhead_seconds", Help: "The gateway's own time per request by action: the latency less the apiserver round trips made for it and the wait for the cache (Server-Timing).",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .02, .05, .1, .25},
		}, []string{"action"}),
	}
	m.registry.MustRegister(m.requests, m.submissions, m.latency, m.overhead,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}
