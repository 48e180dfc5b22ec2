package logshipper

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics of the shipper; Register adds them to a registry.
type Metrics struct {
	linesIn, bytesIn               prometheus.Counter
	linesOut, bytesOut, sendErrors *prometheus.CounterVec
	truncations, truncated         prometheus.Counter
	malformed, abandoned           prometheus.Counter
	lag                            *prometheus.GaugeVec
	skippedBytes, gaps             *prometheus.CounterVec
	collectors                     []prometheus.Collector
}

func newMetrics() *Metrics {
	m := &Metrics{
		linesIn:     prometheus.NewCounter(prometheus.CounterOpts{Name: "trellis_logshipper_lines_read_total", Help: "Physical log lines read."}),
		bytesIn:     prometheus.NewCounter(prometheus.CounterOpts{Name: "trellis_logshipper_bytes_read_total", Help: "Bytes read from log files."}),
		linesOut:    prometheus.NewCounterVec(prometheus.CounterOpts{Name: "trellis_logshipper_lines_shipped_total", Help: "Records acknowledged by the sink."}, []string{"sink"}),
		bytesOut:    prometheus.NewCounterVec(prometheus.CounterOpts{Name: "trellis_logshipper_bytes_shipped_total", Help: "Message bytes acknowledged by the sink."}, []string{"sink"}),
		sendErrors:  prometheus.NewCounterVec(prometheus.CounterOpts{Name: "trellis_logshipper_send_errors_total", Help: "Failed batch sends (each retried)."}, []string{"sink"}),
		truncations: prometheus.NewCounter(prometheus.CounterOpts{Name: "trellis_logshipper_file_truncations_total", Help: "Files truncated under the reader (copytruncate)."}),
		truncated:   prometheus.NewCounter(prometheus.CounterOpts{Name: "trellis_logshipper_lines_truncated_total", Help: "Lines cut at the maximum line length."}),
		malformed:   prometheus.NewCounter(prometheus.CounterOpts{Name: "trellis_logshipper_lines_malformed_total", Help: "Lines not in the CRI format (shipped raw)."}),
		abandoned:   prometheus.NewCounter(prometheus.CounterOpts{Name: "trellis_logshipper_files_abandoned_total", Help: "Deleted files given up on before they were fully shipped."}),
		lag:         prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "trellis_logshipper_lag_bytes", Help: "Bytes written to a container's log and not yet read."}, []string{"namespace", "pod", "container"}),
		skippedBytes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "trellis_logshipper_skipped_bytes_total",
			Help: "Bytes of a container's log lost before they were read (a lower bound): rotated past retention while the shipper was down, truncated with no copy, or deleted and given up on."}, []string{"namespace", "pod", "container"}),
		gaps: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "trellis_logshipper_gaps_total",
			Help: "Holes in a container's shipped log, each marked by a record with a gap field."}, []string{"namespace", "pod", "container"}),
	}
	m.collectors = []prometheus.Collector{m.linesIn, m.bytesIn, m.linesOut, m.bytesOut, m.sendErrors, m.truncations, m.truncated, m.malformed, m.abandoned, m.lag, m.skippedBytes, m.gaps}
	return m
}

// Register adds the metrics, and the checkpoint age of s, to reg.
func (s *Shipper) Register(reg prometheus.Registerer) error {
	age := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "trellis_logshipper_checkpoint_age_seconds", Help: "Time since the checkpoint was last written."},
		func() float64 { return s.CheckpointAge().Seconds() })
	for _, c := range append(s.metrics.collectors, age) {
		if err := reg.Register(c); err != nil {
			return fmt.Errorf("register the log shipper's metrics: %w", err)
		}
	}
	return nil
}
