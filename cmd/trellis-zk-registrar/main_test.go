package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/trellis-dev/trellis/api/wellknown"
	"github.com/trellis-dev/trellis/internal/serverset"
	"github.com/trellis-dev/trellis/internal/testutil/cluster"
	zktest "github.com/trellis-dev/trellis/internal/testutil/zookeeper"
)

// TestMain lets the test binary run as the daemon itself, so the fault
// tests drive a real process (signals, exit codes) without a separate build.
func TestMain(m *testing.M) {
	if os.Getenv("TRELLIS_ZK_REGISTRAR_MAIN") == "1" {
		os.Args = append([]string{os.Args[0]}, strings.Fields(os.Getenv("TRELLIS_ZK_REGISTRAR_ARGS"))...)
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func createPod(t *testing.T, c kubernetes.Interface, name, ip string, ready bool) {
	t.Helper()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Annotations: map[string]string{
			wellknown.AnnotationDiscoveryService: "web", wellknown.AnnotationDiscoveryEnv: "prod", wellknown.AnnotationDiscoveryPorts: "http:8080",
		}},
		Spec: corev1.PodSpec{NodeName: "node-a", Containers: []corev1.Container{{Name: "app", Image: "app"}}},
	}
	if _, err := c.CoreV1().Pods("default").Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	setReady(t, c, name, ip, ready)
}

func setReady(t *testing.T, c kubernetes.Interface, name, ip string, ready bool) {
	t.Helper()
	ctx := context.Background()
	p, err := c.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	st := corev1.ConditionFalse
	if ready {
		st = corev1.ConditionTrue
	}
	p.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}},
		Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: st}}}
	if _, err := c.CoreV1().Pods("default").UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func members(t *testing.T, servers []string) string {
	t.Helper()
	c, _, err := zk.Connect(servers, 5*time.Second, zk.WithLogInfo(false))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	names, _, err := c.Children("/discovery/web/prod")
	if err != nil {
		return ""
	}
	var out []string
	for _, n := range names {
		data, _, err := c.Get("/discovery/web/prod/" + n)
		if err != nil {
			continue
		}
		m, err := serverset.ParseMember(data)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, m.ServiceEndpoint.Host)
	}
	sort.Strings(out)
	return strings.Join(out, ",")
}

// waitMembers waits until the serverset holds exactly want and returns how
// long that took.
func waitMembers(t *testing.T, servers []string, timeout time.Duration, want string) time.Duration {
	t.Helper()
	start := time.Now()
	var got string
	for time.Since(start) < timeout {
		if got = members(t, servers); got == want {
			return time.Since(start)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("serverset %q after %s, want %q", got, timeout, want)
	return 0
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

func scrape(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestIntegrationSIGSTOP freezes a real registrar process past its session
// timeout while pods change, resumes it, and checks that ZooKeeper ends up
// holding exactly the Ready pods; then SIGTERM deregisters before exit.
func TestIntegrationSIGSTOP(t *testing.T) {
	cp := cluster.Start(t, cluster.Options{})
	zks := zktest.Start(t, 1)
	c := cp.Client
	createPod(t, c, "a1", "10.0.1.1", true)
	createPod(t, c, "a2", "10.0.1.2", true)

	const sessionTimeout = 3 * time.Second
	port := freePort(t)
	args := fmt.Sprintf("--kubeconfig=%s --node-name=node-a --zookeeper=%s --session-timeout=%s --verify-interval=500ms --reregister-jitter=500ms --listen=127.0.0.1:%d",
		cp.Kubeconfig, strings.Join(zks.Addrs(), ","), sessionTimeout, port)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "TRELLIS_ZK_REGISTRAR_MAIN=1", "TRELLIS_ZK_REGISTRAR_ARGS="+args)
	var logs strings.Builder
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = cmd.Process.Kill()
		if t.Failed() {
			t.Logf("registrar output:\n%s", logs.String())
		}
	})

	waitMembers(t, zks.Addrs(), 20*time.Second, "10.0.1.1,10.0.1.2")
	if code, body := scrape(t, fmt.Sprintf("http://127.0.0.1:%d/readyz", port)); code != http.StatusOK {
		t.Errorf("/readyz = %d %s, want 200", code, body)
	}
	if _, body := scrape(t, fmt.Sprintf("http://127.0.0.1:%d/metrics", port)); !strings.Contains(body, "trellis_zk_registrar_registrations 2") ||
		!strings.Contains(body, "trellis_zk_registrar_session_connected 1") || !strings.Contains(body, "trellis_zk_registrar_reconcile_lag_seconds 0") {
		t.Errorf("/metrics lacks the expected registrations, session and lag:\n%s", body)
	}

	// Freeze the process: its session expires and ZooKeeper drops its
	// members, while the pods change underneath it.
	if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	expired := waitMembers(t, zks.Addrs(), sessionTimeout+5*time.Second, "")
	t.Logf("members gone %s after SIGSTOP (session timeout %s)", expired.Round(10*time.Millisecond), sessionTimeout)
	setReady(t, c, "a2", "10.0.1.2", false)
	createPod(t, c, "a3", "10.0.1.3", true)
	time.Sleep(sessionTimeout) // stay frozen well past the timeout

	if err := cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	// Bound: reconnect + expiry notice + jitter (0.5 s) + one reconcile.
	back := waitMembers(t, zks.Addrs(), 10*time.Second, "10.0.1.1,10.0.1.3")
	t.Logf("ZooKeeper holds exactly the Ready pods %s after SIGCONT", back.Round(10*time.Millisecond))

	// SIGTERM: deregister first, then exit cleanly.
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("registrar exited with %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("registrar did not exit within 15s of SIGTERM")
	}
	if got := members(t, zks.Addrs()); got != "" {
		t.Errorf("after SIGTERM the serverset still holds %q", got)
	}
}
