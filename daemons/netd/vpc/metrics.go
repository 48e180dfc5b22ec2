package vpc

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics of a pool; Register adds them to a registry.
type Metrics struct {
	calls      *prometheus.CounterVec
	errors     *prometheus.CounterVec
	throttles  *prometheus.CounterVec
	addresses  *prometheus.GaugeVec
	enis       prometheus.Gauge
	collectors []prometheus.Collector
}

func newMetrics() *Metrics {
	m := &Metrics{
		calls:     prometheus.NewCounterVec(prometheus.CounterOpts{Name: "trellis_netd_ec2_calls_total", Help: "EC2 API calls, by action (each retry counts)."}, []string{"action"}),
		errors:    prometheus.NewCounterVec(prometheus.CounterOpts{Name: "trellis_netd_ec2_errors_total", Help: "EC2 API calls that failed, by action (throttling included)."}, []string{"action"}),
		throttles: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "trellis_netd_ec2_throttled_total", Help: "EC2 API calls throttled, by action (each retried after a backoff)."}, []string{"action"}),
		addresses: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "trellis_netd_addresses", Help: "The node's secondary addresses, by state (free, used)."}, []string{"state"}),
		enis:      prometheus.NewGauge(prometheus.GaugeOpts{Name: "trellis_netd_enis", Help: "ENIs attached to the node."}),
	}
	m.collectors = []prometheus.Collector{m.calls, m.errors, m.throttles, m.addresses, m.enis}
	return m
}

func (m *Metrics) call(action string, err error, throttled bool) {
	m.calls.WithLabelValues(action).Inc()
	if err != nil {
		m.errors.WithLabelValues(action).Inc()
	}
	if throttled {
		m.throttles.WithLabelValues(action).Inc()
	}
}

func (m *Metrics) set(s Stats) {
	m.addresses.WithLabelValues("free").Set(float64(s.Free))
	m.addresses.WithLabelValues("used").Set(float64(s.Used))
	m.enis.Set(float64(s.ENIs))
}

// Register adds the pool's metrics to reg.
func (p *Pool) Register(reg prometheus.Registerer) error {
	for _, c := range p.metrics.collectors {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}
