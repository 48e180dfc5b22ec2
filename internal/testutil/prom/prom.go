package prom

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/common/model"
)

// Backfill writes the OpenMetrics text (ending in "# EOF") into a new TSDB
// with promtool and returns its directory. It fails the test when
// promtool is not installed (apt-get install prometheus).
func Backfill(t testing.TB, openMetrics string) string {
	t.Helper()
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatalf("promtool is not installed (apt-get install prometheus): %v", err)
	}
	dir := t.TempDir()
	in := filepath.Join(dir, "history.om")
	if err := os.WriteFile(in, []byte(openMetrics), 0o644); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "data")
	began := time.Now()
	if out, err := exec.Command(promtool, "tsdb", "create-blocks-from", "openmetrics", "--quiet", in, data).CombinedOutput(); err != nil {
		t.Fatalf("promtool: %v\n%s", err, out)
	}
	t.Logf("backfilled %d bytes of OpenMetrics in %s", len(openMetrics), time.Since(began).Round(time.Millisecond))
	return data
}

// Start runs prometheus on the TSDB in data (kept 400 days) until the test
// ends, scraping target (host:port) every second when it is not empty, and
// returns its URL once it is ready.
func Start(t testing.TB, data, target string) string {
	t.Helper()
	conf := "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
	if target != "" {
		conf += fmt.Sprintf("scrape_configs:\n- job_name: target\n  honor_labels: true\n  static_configs: [{targets: [%q]}]\n", target)
	}
	return run(t, data, conf)
}

// Target is an HTTPS endpoint Prometheus scrapes with a bearer token, such
// as a kube-apiserver's /metrics.
type Target struct {
	// Addr is host:port.
	Addr        string
	CAFile      string
	BearerToken string
	Interval    time.Duration
	// Keep, when set, is a regular expression of the metric names kept.
	Keep string
}

// StartScraping runs prometheus on the TSDB in data until the test ends,
// scraping tg, and returns its URL once it is ready.
func StartScraping(t testing.TB, data string, tg Target) string {
	t.Helper()
	iv := model.Duration(tg.Interval).String()
	conf := fmt.Sprintf("global: {scrape_interval: %s, scrape_timeout: %s, evaluation_interval: 1s}\n", iv, iv) +
		"scrape_configs:\n- job_name: target\n  honor_labels: true\n  scheme: https\n" +
		fmt.Sprintf("  tls_config: {ca_file: %q}\n  authorization: {credentials: %q}\n  static_configs: [{targets: [%q]}]\n", tg.CAFile, tg.BearerToken, tg.Addr)
	if tg.Keep != "" {
		conf += fmt.Sprintf("  metric_relabel_configs: [{source_labels: [__name__], regex: %q, action: keep}]\n", tg.Keep)
	}
	return run(t, data, conf)
}

func run(t testing.TB, data, conf string) string {
	t.Helper()
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		t.Fatalf("prometheus is not installed (apt-get install prometheus): %v", err)
	}
	dir := t.TempDir()
	cfg := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfg, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	cmd := exec.Command(bin, "--config.file="+cfg, "--storage.tsdb.path="+data, "--storage.tsdb.retention.time=400d", "--web.listen-address="+addr)
	logf, err := os.Create(filepath.Join(dir, "prometheus.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatalf("failed to start prometheus: %v", err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		logf.Close()
	})
	url := "http://" + addr
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(url + "/-/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return url
			}
			err = fmt.Errorf("%s", resp.Status)
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(filepath.Join(dir, "prometheus.log"))
			t.Fatalf("prometheus not ready: %v\n%s", err, b)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
