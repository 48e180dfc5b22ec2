// Command zkfleet measures ZooKeeper registration at fleet scale: thousands
// of registrar sessions (one per node) registering tens of thousands of
// serverset members against a real local ensemble. It prints the time to
// connect, register and deregister everything, and ZooKeeper writes per pod
// lifecycle counted twice: by the registrars, and independently from the
// ensemble's transaction ids.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path"
	"runtime"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/trellis-dev/trellis/internal/serverset"
	zktest "github.com/trellis-dev/trellis/internal/testutil/zookeeper"
)

func main() {
	sessions := flag.Int("sessions", 2500, "registrar sessions (nodes)")
	members := flag.Int("members", 35000, "serverset members (Ready pods) across the fleet")
	services := flag.Int("services", 500, "serversets the members are spread over")
	ensemble := flag.Int("ensemble", 3, "ZooKeeper servers (1 = standalone)")
	flag.Parse()
	if err := run(*sessions, *members, *services, *ensemble); err != nil {
		fmt.Fprintf(os.Stderr, "zkfleet: %v\n", err)
		os.Exit(1)
	}
}

func run(nSessions, nMembers, nServices, nServers int) error {
	h := &zktest.Standalone{}
	defer h.Close()
	zks := zktest.Start(h, nServers)
	servers := zks.Addrs()
	leader := 0
	if nServers > 1 {
		leader = zks.Leader()
	}
	fmt.Printf("ensemble: %d server(s); fleet: %d sessions, %d members in %d serversets\n", nServers, nSessions, nMembers, nServices)

	obs, _, err := zk.Connect(servers, 30*time.Second, zk.WithLogInfo(false))
	if err != nil {
		return err
	}
	defer obs.Close()
	count := func() int {
		n := 0
		for s := range nServices {
			_, stat, err := obs.Get(path.Join("/discovery", fmt.Sprintf("svc-%03d", s), "prod"))
			if err == nil {
				n += int(stat.NumChildren)
			}
		}
		return n
	}
	waitCount := func(want int, timeout time.Duration) error {
		start := time.Now()
		for time.Since(start) < timeout {
			if count() == want {
				return nil
			}
			time.Sleep(100 * time.Millisecond)
		}
		return fmt.Errorf("serversets hold %d members after %s, want %d", count(), timeout, want)
	}
	// Serversets are long-lived: their parents exist before pods come and
	// go, so the transactions counted below are member writes and sessions.
	for _, p := range []string{"/discovery"} {
		if _, err := obs.Create(p, nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
			return err
		}
	}
	for s := range nServices {
		for _, p := range []string{fmt.Sprintf("/discovery/svc-%03d", s), fmt.Sprintf("/discovery/svc-%03d/prod", s)} {
			if _, err := obs.Create(p, nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
				return err
			}
		}
	}
	zxid0 := zks.Zxid(leader)

	// Connect every registrar (a node daemon each).
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	regs := make([]*serverset.Registrar, nSessions)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range regs {
		regs[i] = serverset.New(serverset.Config{Servers: servers, SessionTimeout: 30 * time.Second, BufferSize: 256 << 10})
		wg.Go(func() { _ = regs[i].Run(ctx) })
	}
	for _, r := range regs {
		for !r.HasSession() {
			time.Sleep(10 * time.Millisecond)
		}
	}
	connect := time.Since(start)

	// Register: member j lives on node j % sessions, in serverset j % services.
	start = time.Now()
	for j := range nMembers {
		reg := serverset.Registration{Service: fmt.Sprintf("svc-%03d", j%nServices), Env: "prod", Member: serverset.Member{
			ServiceEndpoint: serverset.Endpoint{Host: fmt.Sprintf("10.%d.%d.%d", j>>16&255, j>>8&255, j&255), Port: 8080},
		}}
		if err := regs[j%nSessions].Set(fmt.Sprintf("default/pod-%d", j), reg); err != nil {
			return err
		}
	}
	if err := waitCount(nMembers, 10*time.Minute); err != nil {
		return err
	}
	register := time.Since(start)
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)

	// Deregister every member (pods going NotReady), sessions kept.
	start = time.Now()
	for j := range nMembers {
		regs[j%nSessions].Remove(fmt.Sprintf("default/pod-%d", j))
	}
	if err := waitCount(0, 10*time.Minute); err != nil {
		return err
	}
	deregister := time.Since(start)
	var writes int64
	for _, r := range regs {
		writes += r.Writes()
	}
	zxidMembers := zks.Zxid(leader) - zxid0
	cancel()
	wg.Wait()

	// Transactions besides member writes: one createSession per registrar.
	memberTxns := zxidMembers - int64(nSessions)
	fmt.Printf("connect %d sessions:      %8.2f s\n", nSessions, connect.Seconds())
	fmt.Printf("register %d members:   %8.2f s  (%.0f members/s)\n", nMembers, register.Seconds(), float64(nMembers)/register.Seconds())
	fmt.Printf("deregister %d members: %8.2f s  (%.0f members/s)\n", nMembers, deregister.Seconds(), float64(nMembers)/deregister.Seconds())
	fmt.Printf("writes per pod lifecycle: %.3f counted by the registrars, %.3f from the ensemble's zxids (target 2)\n",
		float64(writes)/float64(nMembers), float64(memberTxns)/float64(nMembers))
	fmt.Printf("bench process heap in use at full registration: %d MiB\n", ms.HeapInuse>>20)
	return nil
}
