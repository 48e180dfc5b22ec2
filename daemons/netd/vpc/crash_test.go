package vpc_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/trellis-dev/trellis/daemons/netd/vpc"
)

// The crash tests run the pool in a child process (this test binary again)
// and kill it with SIGKILL at the point they choose.
const childEnv = "TRELLIS_VPC_POOL_CHILD"

type childConfig struct {
	URL, Instance, State string
	Pods                 int
}

func TestMain(m *testing.M) {
	if c := os.Getenv(childEnv); c != "" {
		if err := runChild(c); err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// runChild opens a pool, assigns pods one by one, printing each, and waits
// to be killed.
func runChild(raw string) error {
	var c childConfig
	if err := json.Unmarshal([]byte(raw), &c); err != nil {
		return err
	}
	ctx := context.Background()
	p, err := vpc.Open(ctx, vpc.Config{EC2: vpc.NewClient(awsConfig(c.URL)), InstanceID: c.Instance, StateFile: c.State,
		Discipline: vpc.Discipline{Rate: 1000, Burst: 1000}})
	if err != nil {
		return err
	}
	for i := range c.Pods {
		a, err := p.Assign(ctx, vpc.Key{Container: fmt.Sprintf("c%d", i), Iface: "eth0", Pod: fmt.Sprintf("ns/pod-%d", i)})
		if err != nil {
			return err
		}
		fmt.Printf("assigned %s %s\n", a.Container, a.IP)
	}
	select {}
}

type child struct {
	cmd   *exec.Cmd
	lines chan string
}

func (e *env) startChild(pods int) *child {
	e.t.Helper()
	raw, _ := json.Marshal(childConfig{URL: e.proxy.URL, Instance: e.instance, State: e.state, Pods: pods})
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+string(raw))
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		e.t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	c := &child{cmd: cmd, lines: make(chan string, 100)}
	go func() {
		s := bufio.NewScanner(out)
		for s.Scan() {
			c.lines <- s.Text()
		}
		close(c.lines)
	}()
	e.t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return c
}

// kill sends SIGKILL and reaps the child.
func (c *child) kill(t *testing.T) {
	t.Helper()
	if err := c.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = c.cmd.Wait()
}

func waitFor(t *testing.T, what string, ch <-chan struct{}) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(60 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
	}
}

// Killed after EC2 created an ENI and before the pool attached or recorded
// it: the next start deletes it.
func TestIntegrationPoolKilledAfterCreatingAnENI(t *testing.T) {
	e := newEnv(t, "t3.medium")
	held := e.proxy.Hold("CreateNetworkInterface")
	c := e.startChild(6) // the primary ENI holds 5: the 6th pod needs a new one
	waitFor(t, "the child's CreateNetworkInterface", held)
	c.kill(t)
	if got := e.cloud().available; len(got) != 1 {
		t.Fatalf("the kill left %d unattached ENIs, want the 1 just created", len(got))
	}
	e.proxy.Clear()
	p := e.open(e.config())
	if s := p.Stats(); s.Used != 5 || s.ENIs != 1 {
		t.Fatalf("after the restart: %+v, want the 5 recorded pods on 1 ENI", s)
	}
	e.agree(p) // fails if the ENI is still there
}

// Killed after EC2 assigned addresses and before the pool recorded any of
// them: the next start finds them on the ENI and hands them out without
// asking EC2 again.
func TestIntegrationPoolKilledAfterAssigningAddresses(t *testing.T) {
	e := newEnv(t, "t3.medium")
	held := e.proxy.Hold("AssignPrivateIpAddresses")
	c := e.startChild(1)
	waitFor(t, "the child's AssignPrivateIpAddresses", held)
	c.kill(t)
	if got := e.cloud().addresses(); len(got) != 5 {
		t.Fatalf("EC2 holds %d addresses after the kill, want the 5 the child asked for", len(got))
	}
	e.proxy.Clear()
	p := e.open(e.config())
	if s := p.Stats(); s.Free != 5 || s.Used != 0 {
		t.Fatalf("after the restart: %+v, want the 5 addresses free", s)
	}
	e.proxy.ResetCalls()
	ctx := context.Background()
	for i := range 5 {
		if _, err := p.Assign(ctx, vpc.Key{Container: fmt.Sprintf("n%d", i), Iface: "eth0", Pod: "ns/n"}); err != nil {
			t.Fatal(err)
		}
	}
	if n := e.proxy.Calls()["AssignPrivateIpAddresses"]; n != 0 {
		t.Errorf("the restarted pool asked EC2 for addresses %d times; the 5 it had were leaked", n)
	}
	e.agree(p)
}

// Killed after recording pods whose CNI ADD then never finished: the pods
// that do not exist have their addresses collected.
func TestIntegrationPoolCollectsPodsThatAreGone(t *testing.T) {
	e := newEnv(t, "m5.large")
	c := e.startChild(4)
	for range 4 {
		select {
		case l, ok := <-c.lines:
			if !ok || !strings.HasPrefix(l, "assigned ") {
				t.Fatalf("child: %q", l)
			}
		case <-time.After(60 * time.Second):
			t.Fatal("the child assigned nothing")
		}
	}
	c.kill(t)
	p := e.open(e.config())
	if s := p.Stats(); s.Used != 4 {
		t.Fatalf("after the restart: %+v, want the 4 recorded pods", s)
	}
	gone, err := p.Collect(func(a vpc.Assignment) bool { return a.Pod == "ns/pod-0" }, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(gone) != 3 || p.Stats().Used != 1 {
		t.Fatalf("collected %d, %d left; want 3 collected and pod-0 kept", len(gone), p.Stats().Used)
	}
	// Young assignments are kept: their pods may not be listed yet.
	if _, err := p.Assign(context.Background(), vpc.Key{Container: "young", Iface: "eth0", Pod: "ns/young"}); err != nil {
		t.Fatal(err)
	}
	if gone, _ := p.Collect(func(vpc.Assignment) bool { return false }, time.Hour); len(gone) != 0 {
		t.Fatalf("collected %d assignments younger than the grace", len(gone))
	}
	e.agree(p)
}
