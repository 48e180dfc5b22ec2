package quota

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/trellis-dev/trellis/internal/testutil/prom"
)

// fakeKubeStateMetrics serves the kube-state-metrics series the quota
// queries read, with values the test sets: kube-state-metrics itself needs
// a cluster and is not built here; the Prometheus that scrapes it and
// evaluates the queries is real.
type fakeKubeStateMetrics struct {
	reg                *prometheus.Registry
	requests, limits   *prometheus.GaugeVec
	phase              *prometheus.GaugeVec
	configmaps, secret *prometheus.GaugeVec
}

func newFakeKubeStateMetrics() *fakeKubeStateMetrics {
	f := &fakeKubeStateMetrics{reg: prometheus.NewRegistry()}
	f.requests = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "kube_pod_container_resource_requests"}, []string{"namespace", "pod", "container", "resource", "unit"})
	f.limits = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "kube_pod_container_resource_limits"}, []string{"namespace", "pod", "container", "resource", "unit"})
	f.phase = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "kube_pod_status_phase"}, []string{"namespace", "pod", "phase"})
	f.configmaps = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "kube_configmap_info"}, []string{"namespace", "configmap"})
	f.secret = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "kube_secret_info"}, []string{"namespace", "secret"})
	f.reg.MustRegister(f.requests, f.limits, f.phase, f.configmaps, f.secret)
	return f
}

// pods sets namespace ns to n pods, each requesting 500m and 1Gi (limits
// twice that), Running; plus done pods that have finished (they must not
// count).
func (f *fakeKubeStateMetrics) pods(ns string, n, done int) {
	f.requests.Reset()
	f.limits.Reset()
	f.phase.Reset()
	for i := range n + done {
		pod := fmt.Sprintf("p%d", i)
		f.requests.WithLabelValues(ns, pod, "app", "cpu", "core").Set(0.5)
		f.requests.WithLabelValues(ns, pod, "app", "memory", "byte").Set(1 << 30)
		f.limits.WithLabelValues(ns, pod, "app", "cpu", "core").Set(1)
		f.limits.WithLabelValues(ns, pod, "app", "memory", "byte").Set(2 << 30)
		for _, ph := range []string{"Pending", "Running", "Succeeded", "Failed", "Unknown"} {
			v := 0.0
			if (i < n && ph == "Running") || (i >= n && ph == "Succeeded") {
				v = 1
			}
			f.phase.WithLabelValues(ns, pod, ph).Set(v)
		}
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// startPrometheus runs Debian's prometheus scraping target every second.
func startPrometheus(t *testing.T, target string) string {
	t.Helper()
	return prom.Start(t, filepath.Join(t.TempDir(), "data"), target)
}

// TestIntegrationPlanFromPrometheus plans from the peak a real Prometheus
// saw: 12 Running pods for a while, then 4; finished pods never count.
func TestIntegrationPlanFromPrometheus(t *testing.T) {
	ksm := newFakeKubeStateMetrics()
	var mu sync.Mutex
	handler := promhttp.HandlerFor(ksm.reg, promhttp.HandlerOpts{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		handler.ServeHTTP(w, r)
	}))
	defer srv.Close()
	set := func(f func()) {
		mu.Lock()
		defer mu.Unlock()
		f()
	}
	set(func() {
		ksm.pods("team-a", 12, 5)
		ksm.configmaps.WithLabelValues("team-a", "cm-1").Set(1)
		ksm.configmaps.WithLabelValues("team-a", "cm-2").Set(1)
		ksm.secret.WithLabelValues("team-b", "s-1").Set(1)
	})
	url := startPrometheus(t, strings.TrimPrefix(srv.URL, "http://"))
	ctx := context.Background()

	// Wait until Prometheus has scraped the peak, then lower usage and
	// wait until it has seen that too.
	waitFor := func(what string, pods int) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			s, err := FromPrometheus(ctx, url, 5*time.Second, time.Second, time.Now())
			if err == nil {
				for _, x := range s {
					if q, ok := x.Usage[corev1.ResourcePods]; x.Namespace == "team-a" && ok && q.Value() == int64(pods) {
						return
					}
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: Prometheus never showed %d pods: %v %v", what, pods, s, err)
			}
			time.Sleep(500 * time.Millisecond)
		}
	}
	waitFor("peak", 12)
	set(func() { ksm.pods("team-a", 4, 20) })
	waitFor("after the peak (last 5 s)", 4)

	samples, err := FromPrometheus(ctx, url, 10*time.Minute, time.Second, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	plan := MakePlan(samples, 0.2, nil)
	a := plan.Quotas["team-a"]
	q := resource.MustParse
	for r, want := range map[corev1.ResourceName]string{
		corev1.ResourcePods:           "15",    // 12 x 1.2 = 14.4
		corev1.ResourceRequestsCPU:    "7200m", // 12 x 500m x 1.2
		corev1.ResourceLimitsCPU:      "14400m",
		corev1.ResourceRequestsMemory: "14784Mi", // 12 GiB x 1.2 = 14745.6 Mi, up to 64 Mi
		"count/configmaps":            "10",      // 2 x 1.2, the minimum
	} {
		if got := a[r]; got.Cmp(q(want)) != 0 {
			t.Errorf("team-a %s = %s, want %s (peak from Prometheus)", r, got.String(), want)
		}
	}
	if _, ok := plan.Quotas["team-b"]; !ok {
		t.Errorf("team-b (a secret only) has no quota: %v", plan.Quotas)
	}
}

func TestPrometheusUnreachable(t *testing.T) {
	url := fmt.Sprintf("http://127.0.0.1:%d", freePort(t))
	_, err := FromPrometheus(context.Background(), url, time.Hour, time.Minute, time.Now())
	if err == nil || !strings.Contains(err.Error(), url) {
		t.Fatalf("unreachable Prometheus: err = %v, want one naming %s", err, url)
	}
}
