package serverset

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"sort"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	zktest "github.com/trellis-dev/trellis/internal/testutil/zookeeper"
)

const digest = "trellis-registrar:s3cret"

func member(host string, port int) Registration {
	return Registration{Service: "web", Env: "prod", Member: Member{ServiceEndpoint: Endpoint{Host: host, Port: port}}}
}

func startRegistrar(t *testing.T, servers []string, timeout time.Duration) (*Registrar, context.CancelFunc, chan error) {
	t.Helper()
	r := New(Config{Servers: servers, SessionTimeout: timeout, VerifyInterval: 500 * time.Millisecond, Digest: digest})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("registrar: %v", err)
		}
	})
	return r, cancel, done
}

// members reads a serverset with a separate client, as service clients do.
func members(t *testing.T, servers []string, dir string) []string {
	t.Helper()
	c, _, err := zk.Connect(servers, 5*time.Second, zk.WithLogInfo(false), zk.WithLogger(discardLogger{}))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	names, _, err := c.Children(dir)
	if errors.Is(err, zk.ErrNoNode) {
		return nil
	}
	if err != nil {
		return []string{"error: " + err.Error()}
	}
	var out []string
	for _, n := range names {
		data, _, err := c.Get(dir + "/" + n)
		if err != nil {
			continue
		}
		m, err := ParseMember(data)
		if err != nil {
			t.Fatalf("member %s: %v", n, err)
		}
		out = append(out, fmt.Sprintf("%s:%d/%s", m.ServiceEndpoint.Host, m.ServiceEndpoint.Port, m.Status))
	}
	sort.Strings(out)
	return out
}

func eventually(t *testing.T, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if cond() {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("timed out after %s waiting for %s", timeout, what)
}

func equal(a []string, b ...string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestIntegrationRegisterDeregister(t *testing.T) {
	zks := zktest.Start(t, 1)
	r, cancel, done := startRegistrar(t, zks.Addrs(), 4*time.Second)
	for i, host := range []string{"10.1.0.1", "10.1.0.2", "10.1.0.3"} {
		if err := r.Set(fmt.Sprintf("pod-%d", i), member(host, 8080)); err != nil {
			t.Fatal(err)
		}
	}
	dir := "/discovery/web/prod"
	eventually(t, "three members", 10*time.Second, func() bool {
		return equal(members(t, zks.Addrs(), dir), "10.1.0.1:8080/ALIVE", "10.1.0.2:8080/ALIVE", "10.1.0.3:8080/ALIVE")
	})

	// An independent client (python3-kazoo) reads the same serverset.
	script := `import json, sys
from kazoo.client import KazooClient
zk = KazooClient(hosts=sys.argv[1]); zk.start(timeout=10)
out = []
for c in zk.get_children(sys.argv[2]):
    d, _ = zk.get(sys.argv[2] + "/" + c)
    m = json.loads(d)
    out.append("%s:%d" % (m["serviceEndpoint"]["host"], m["serviceEndpoint"]["port"]))
print(json.dumps(sorted(out))); zk.stop()`
	out, err := exec.Command("/usr/bin/python3", "-c", script, zks.Addrs()[0], dir).CombinedOutput()
	if err != nil {
		t.Fatalf("kazoo: %v\n%s", err, out)
	}
	var got []string
	if err := json.Unmarshal(out, &got); err != nil || !equal(got, "10.1.0.1:8080", "10.1.0.2:8080", "10.1.0.3:8080") {
		t.Fatalf("kazoo read %s (%v)", out, err)
	}

	// Only the registrar's credentials may change the serverset.
	c, _, err := zk.Connect(zks.Addrs(), 5*time.Second, zk.WithLogInfo(false), zk.WithLogger(discardLogger{}))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, p := range r.Registered() {
		if err := c.Delete(p, -1); !errors.Is(err, zk.ErrNoAuth) {
			t.Errorf("unauthenticated delete of %s: want ErrNoAuth, got %v", p, err)
		}
		break
	}

	// A member deleted behind the registrar's back (with its credentials,
	// as an operator could) is back after the next full pass: passes on a
	// change check only what changed (VerifyInterval here: 500 ms).
	admin, _, err := zk.Connect(zks.Addrs(), 5*time.Second, zk.WithLogInfo(false), zk.WithLogger(discardLogger{}))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if err := admin.AddAuth("digest", []byte(digest)); err != nil {
		t.Fatal(err)
	}
	if err := admin.Delete(r.Registered()["pod-0"], -1); err != nil {
		t.Fatalf("delete pod-0's member: %v", err)
	}
	eventually(t, "pod-0 back after a full pass", 5*time.Second, func() bool {
		return equal(members(t, zks.Addrs(), dir), "10.1.0.1:8080/ALIVE", "10.1.0.2:8080/ALIVE", "10.1.0.3:8080/ALIVE")
	})

	r.Remove("pod-1")
	eventually(t, "pod-1 gone", 10*time.Second, func() bool {
		return equal(members(t, zks.Addrs(), dir), "10.1.0.1:8080/ALIVE", "10.1.0.3:8080/ALIVE")
	})
	if w := r.Writes(); w != 5 {
		t.Errorf("writes = %d, want 5 (3 creates, 1 re-create, 1 delete)", w)
	}
	// Shutting down deregisters at once, not after the session timeout.
	cancel()
	if err := <-done; err != nil {
		t.Errorf("registrar: %v", err)
	}
	done <- nil // for the cleanup
	if got := members(t, zks.Addrs(), dir); len(got) != 0 {
		t.Errorf("after shutdown: %v", got)
	}
}

func TestIntegrationSessionExpiry(t *testing.T) {
	zks := zktest.Start(t, 1)
	// The registrar reaches ZooKeeper through a proxy the test can cut: the
	// server stays up and expires the session, as it would for a registrar
	// that was partitioned or paused (SIGSTOP) past the session timeout.
	proxy := newPartition(t, zks.Addrs()[0])
	r, _, _ := startRegistrar(t, []string{proxy.Addr()}, 3*time.Second)
	for i := range 3 {
		if err := r.Set(fmt.Sprintf("pod-%d", i), member(fmt.Sprintf("10.2.0.%d", i), 9000)); err != nil {
			t.Fatal(err)
		}
	}
	dir := "/discovery/web/prod"
	eventually(t, "registered", 10*time.Second, func() bool { return len(members(t, zks.Addrs(), dir)) == 3 })
	before := r.Registered()

	proxy.Cut()
	// The session expires: its members vanish for every client.
	eventually(t, "the expired session's members to vanish", 20*time.Second, func() bool { return len(members(t, zks.Addrs(), dir)) == 0 })
	proxy.Heal()
	start := time.Now()
	eventually(t, "re-registered under a new session", 30*time.Second, func() bool {
		after := r.Registered()
		return len(after) == 3 && after["pod-0"] != before["pod-0"] && len(members(t, zks.Addrs(), dir)) == 3
	})
	t.Logf("re-registered %s after the partition healed", time.Since(start).Round(10*time.Millisecond))
	time.Sleep(time.Second)
	if got := members(t, zks.Addrs(), dir); len(got) != 3 {
		t.Errorf("want exactly 3 members, got %v", got)
	}
}

func TestIntegrationWipedServer(t *testing.T) {
	zks := zktest.Start(t, 1)
	r, _, _ := startRegistrar(t, zks.Addrs(), 2*time.Second)
	if err := r.Set("pod-0", member("10.3.0.1", 7000)); err != nil {
		t.Fatal(err)
	}
	dir := "/discovery/web/prod"
	eventually(t, "registered", 10*time.Second, func() bool { return len(members(t, zks.Addrs(), dir)) == 1 })
	// The server comes back with no data: it refuses the client's zxid until
	// the registrar builds a new client.
	zks.Kill(0)
	zks.Wipe(0)
	zks.StartServer(0)
	zks.WaitServing(0, 30*time.Second)
	eventually(t, "registered again on the wiped server", 30*time.Second, func() bool {
		return equal(members(t, zks.Addrs(), dir), "10.3.0.1:7000/ALIVE")
	})
}

// TestIntegrationEnsembleFaults: kill -9 the leader of a 3-node ensemble,
// then stop the whole ensemble longer than the session timeout and start it
// again; each time ZooKeeper ends up holding exactly the registered members.
func TestIntegrationEnsembleFaults(t *testing.T) {
	zks := zktest.Start(t, 3)
	r, _, _ := startRegistrar(t, zks.Addrs(), 3*time.Second)
	want := []string{}
	for i := range 5 {
		host := fmt.Sprintf("10.6.0.%d", i)
		if err := r.Set(fmt.Sprintf("pod-%d", i), member(host, 80)); err != nil {
			t.Fatal(err)
		}
		want = append(want, host+":80/ALIVE")
	}
	sort.Strings(want)
	dir := "/discovery/web/prod"
	exactly := func(what string, bound time.Duration) {
		t.Helper()
		start := time.Now()
		eventually(t, what, bound, func() bool { return equal(members(t, zks.Addrs(), dir), want...) })
		t.Logf("%s: converged in %s", what, time.Since(start).Round(10*time.Millisecond))
	}
	exactly("registered", 10*time.Second)

	leader := zks.Leader()
	if leader < 0 {
		t.Fatal("no leader")
	}
	zks.Kill(leader)
	exactly("after killing the leader", 20*time.Second)
	zks.StartServer(leader)
	zks.WaitServing(leader, 30*time.Second)

	for i := range zks.Servers {
		zks.Kill(i)
	}
	time.Sleep(5 * time.Second) // longer than the 3s session timeout
	for i := range zks.Servers {
		zks.StartServer(i)
	}
	for i := range zks.Servers {
		zks.WaitServing(i, 60*time.Second)
	}
	exactly("after the whole ensemble was down past the session timeout", 30*time.Second)
	time.Sleep(2 * time.Second)
	if got := members(t, zks.Addrs(), dir); !equal(got, want...) {
		t.Errorf("not exactly the registered members after settling: %v", got)
	}
}

// TestIntegrationCreateRateLimit: a burst of registrations (what a session
// loss on a full node produces) is spread at the configured rate, every
// deferred creation still lands, and deregistrations are never held back.
func TestIntegrationCreateRateLimit(t *testing.T) {
	zks := zktest.Start(t, 1)
	r := New(Config{Servers: zks.Addrs(), SessionTimeout: 4 * time.Second, VerifyInterval: time.Minute,
		CreateRate: 20, CreateBurst: 5, ReregisterJitter: -1})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("registrar: %v", err)
		}
	})

	const n = 45
	start := time.Now()
	for i := range n {
		if err := r.Set(fmt.Sprintf("pod-%d", i), member(fmt.Sprintf("10.2.0.%d", i+1), 8080)); err != nil {
			t.Fatal(err)
		}
	}
	if r.Lag() == 0 {
		t.Error("Lag() = 0 right after 45 Sets, want > 0")
	}
	eventually(t, "45 members", 20*time.Second, func() bool { return len(members(t, zks.Addrs(), "/discovery/web/prod")) == n })
	took := time.Since(start)
	// 5 at once, then 40 at 20/s: about 2 s. Without the limit it takes
	// well under 0.5 s here.
	if took < 1500*time.Millisecond {
		t.Errorf("45 creations took %s, want >= 1.5s at 20/s with burst 5", took)
	}
	if r.Throttled() == 0 {
		t.Error("Throttled() = 0, want > 0")
	}
	if w := r.Writes(); w != n {
		t.Errorf("writes = %d, want %d: deferral must not cost extra writes", w, n)
	}
	eventually(t, "lag back to 0", 5*time.Second, func() bool { return r.Lag() == 0 })
	t.Logf("45 creations at 20/s took %s; %d passes deferred creations", took, r.Throttled())

	// Deletions never wait for the limiter: no pass defers one. Counted,
	// not timed (a wall-clock bound failed on a loaded machine): the
	// bucket holds at most its burst of 5, so 45 deletions that asked it
	// would be deferred, and each deferring pass counts.
	throttled := r.Throttled()
	for i := range n {
		r.Remove(fmt.Sprintf("pod-%d", i))
	}
	eventually(t, "all members gone", 10*time.Second, func() bool { return len(members(t, zks.Addrs(), "/discovery/web/prod")) == 0 })
	if d := r.Throttled() - throttled; d != 0 {
		t.Errorf("%d passes deferred while 45 members were deregistered: deletions must not be rate limited", d)
	}
}
