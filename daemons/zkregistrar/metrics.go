package zkregistrar

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/trellis-dev/trellis/internal/serverset"
)

// Metrics of the registrar daemon.
type Metrics struct {
	Registrations prometheus.GaugeFunc
	Writes        prometheus.CounterFunc
	Session       prometheus.GaugeFunc
	Lag           prometheus.GaugeFunc
	Throttled     prometheus.CounterFunc
	GateWrites    prometheus.CounterFunc
	SweepWrites   prometheus.CounterFunc
	SweepLongest  prometheus.GaugeFunc
}

// NewMetrics exposes a registrar's state, the daemon's readiness-gate
// writes (d may be nil) and the sweeper's (s may be nil); Register adds
// them to a registry.
func NewMetrics(r *serverset.Registrar, d *Daemon, s *Sweeper) *Metrics {
	return &Metrics{
		SweepWrites: prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "trellis_zk_registrar_sweep_writes_total", Help: "pods/status patches sent by the sweeper (False for pods whose node's registrar is gone).",
		}, func() float64 {
			if s == nil {
				return 0
			}
			return float64(s.Writes())
		}),
		SweepLongest: prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "trellis_zk_registrar_sweep_longest_pass_seconds", Help: "the longest pass of the sweeper since this registrar started (a pass longer than --sweep-interval delays the next).",
		}, func() float64 {
			if s == nil {
				return 0
			}
			return s.LongestPass().Seconds()
		}),
		GateWrites: prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "trellis_zk_registrar_gate_writes_total", Help: "pods/status patches of the trellis.dev/registered readiness gate.",
		}, func() float64 {
			if d == nil {
				return 0
			}
			return float64(d.GateWrites())
		}),
		Registrations: prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "trellis_zk_registrar_registrations", Help: "Serverset members registered by this process.",
		}, func() float64 { return float64(len(r.Registered())) }),
		Writes: prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "trellis_zk_registrar_writes_total", Help: "ZooKeeper create and delete requests sent.",
		}, func() float64 { return float64(r.Writes()) }),
		Session: prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "trellis_zk_registrar_session_connected", Help: "1 while the ZooKeeper client has a session.",
		}, func() float64 {
			if r.HasSession() {
				return 1
			}
			return 0
		}),
		Lag: prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "trellis_zk_registrar_reconcile_lag_seconds", Help: "How long ZooKeeper has differed from the desired registrations (0 when in sync).",
		}, func() float64 { return r.Lag().Seconds() }),
		Throttled: prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "trellis_zk_registrar_throttled_total", Help: "Reconcile passes that deferred creations to the churn rate limit or re-registration jitter.",
		}, func() float64 { return float64(r.Throttled()) }),
	}
}

// Register adds the metrics to reg.
func (m *Metrics) Register(reg prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{m.Registrations, m.Writes, m.Session, m.Lag, m.Throttled, m.GateWrites, m.SweepWrites, m.SweepLongest} {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}
