package traffic

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/trellis-dev/trellis/internal/serverset"
	zktest "github.com/trellis-dev/trellis/internal/testutil/zookeeper"
)

func count(t *testing.T, servers []string) int {
	t.Helper()
	c, _, err := zk.Connect(servers, 5*time.Second, zk.WithLogInfo(false))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ms, err := serverset.Read(c, "/discovery/app/prod")
	if err != nil {
		t.Fatal(err)
	}
	return len(ms)
}

func waitCount(t *testing.T, servers []string, want int, what string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if count(t, servers) == want {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%s: want %d members", what, want)
}

func TestIntegrationTrafficSidecar(t *testing.T) {
	zks := zktest.Start(t, 1)
	var healthy atomic.Bool
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if !healthy.Load() {
			http.Error(w, "not yet", http.StatusServiceUnavailable)
		}
	}))
	defer app.Close()

	reg := serverset.New(serverset.Config{Servers: zks.Addrs(), SessionTimeout: 4 * time.Second, VerifyInterval: time.Second})
	regCtx, regCancel := context.WithCancel(context.Background())
	regDone := make(chan struct{})
	go func() { _ = reg.Run(regCtx); close(regDone) }()
	defer func() { regCancel(); <-regDone }()

	var deregisteredAt atomic.Int64
	s, err := New(Config{
		Check: HTTPCheck(app.URL+"/healthz", time.Second), Registry: reg, Key: "pod",
		Registration: serverset.Registration{Service: "app", Env: "prod", Member: serverset.Member{ServiceEndpoint: serverset.Endpoint{Host: "10.8.0.1", Port: 8080}}},
		Interval:     50 * time.Millisecond, Rise: 2, Fall: 2, Drain: 700 * time.Millisecond,
		Deregistered: func() { deregisteredAt.Store(time.Now().UnixNano()) },
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan time.Time, 1)
	go func() { _ = s.Run(ctx); done <- time.Now() }()

	time.Sleep(300 * time.Millisecond)
	if count(t, zks.Addrs()) != 0 {
		t.Fatal("registered while the app was unhealthy")
	}
	healthy.Store(true)
	waitCount(t, zks.Addrs(), 1, "healthy app registered")
	healthy.Store(false)
	waitCount(t, zks.Addrs(), 0, "unhealthy app deregistered")
	healthy.Store(true)
	waitCount(t, zks.Addrs(), 1, "registered again")

	// SIGTERM: deregister first, then drain, then exit.
	cancel()
	waitCount(t, zks.Addrs(), 0, "deregistered on shutdown")
	gone := time.Now()
	exited := <-done
	if deregisteredAt.Load() == 0 {
		t.Fatal("no deregistration on shutdown")
	}
	if !exited.After(gone) || exited.Sub(time.Unix(0, deregisteredAt.Load())) < 700*time.Millisecond {
		t.Errorf("the sidecar exited %s after deregistering; want the 700ms drain first", exited.Sub(time.Unix(0, deregisteredAt.Load())))
	}
}

func TestTCPCheck(t *testing.T) {
	app := httptest.NewServer(http.NotFoundHandler())
	addr := app.Listener.Addr().String()
	if err := TCPCheck(addr, time.Second)(context.Background()); err != nil {
		t.Fatalf("open port: %v", err)
	}
	app.Close()
	if err := TCPCheck(addr, 200*time.Millisecond)(context.Background()); err == nil {
		t.Fatal("closed port passed")
	}
}
