// Package zookeeper runs real ZooKeeper servers (Debian's zookeeper package)
// on loopback for tests: standalone or an ensemble, with the fault
// operations the tests need (kill, stop/start, wipe, find the leader).
package zookeeper

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// TB is the part of testing.TB the harness uses. *testing.T and *testing.B
// satisfy it; bench commands pass their own (see Standalone).
type TB interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
	Cleanup(func())
	TempDir() string
}

// Classpath runs Debian's ZooKeeper without its init scripts.
const Classpath = "/usr/share/java/zookeeper.jar:/usr/share/java/slf4j-simple.jar"

// Server is one ZooKeeper server.
type Server struct {
	ID         int
	Dir        string
	ClientPort int
	cmd        *exec.Cmd
	done       chan struct{}
}

// Ensemble is a set of servers; a standalone server is an ensemble of one.
type Ensemble struct {
	t       TB
	Servers []*Server
}

// Start runs n servers (1 = standalone) and waits until each serves. It
// fails the test when ZooKeeper is not installed: CI installs it.
func Start(t TB, n int) *Ensemble {
	t.Helper()
	if _, err := os.Stat("/usr/share/java/zookeeper.jar"); err != nil {
		t.Fatalf("ZooKeeper is not installed (apt-get install zookeeper): %v", err)
	}
	e := &Ensemble{t: t}
	base := t.TempDir()
	ports := freePorts(t, 3*n)
	var quorum []string
	for i := range n {
		quorum = append(quorum, fmt.Sprintf("server.%d=127.0.0.1:%d:%d", i+1, ports[3*i+1], ports[3*i+2]))
	}
	for i := range n {
		s := &Server{ID: i + 1, Dir: filepath.Join(base, fmt.Sprintf("zk%d", i+1)), ClientPort: ports[3*i]}
		if err := os.MkdirAll(filepath.Join(s.Dir, "data"), 0o755); err != nil {
			t.Fatal(err)
		}
		cfg := []string{
			"tickTime=1000", "initLimit=10", "syncLimit=5",
			"dataDir=" + filepath.Join(s.Dir, "data"),
			fmt.Sprintf("clientPort=%d", s.ClientPort), "clientPortAddress=127.0.0.1",
			"admin.enableServer=false", "4lw.commands.whitelist=*", "maxSessionTimeout=60000",
			// Fleet benchmarks open thousands of sessions from 127.0.0.1.
			"maxClientCnxns=0",
		}
		if n > 1 {
			cfg = append(cfg, quorum...)
			if err := os.WriteFile(filepath.Join(s.Dir, "data", "myid"), fmt.Appendf(nil, "%d\n", s.ID), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(s.Dir, "zoo.cfg"), []byte(strings.Join(cfg, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		e.Servers = append(e.Servers, s)
	}
	t.Cleanup(func() {
		for i := range e.Servers {
			e.Kill(i)
		}
	})
	for i := range e.Servers {
		e.StartServer(i)
	}
	for i := range e.Servers {
		e.WaitServing(i, 60*time.Second)
	}
	return e
}

// Addrs are the client addresses of every server.
func (e *Ensemble) Addrs() []string {
	var out []string
	for _, s := range e.Servers {
		out = append(out, fmt.Sprintf("127.0.0.1:%d", s.ClientPort))
	}
	return out
}

// StartServer starts server i (again).
func (e *Ensemble) StartServer(i int) {
	e.t.Helper()
	s := e.Servers[i]
	log, err := os.OpenFile(filepath.Join(s.Dir, "server.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		e.t.Fatal(err)
	}
	cmd := exec.Command("java", "-Xmx256m", "-cp", Classpath, "org.apache.zookeeper.server.quorum.QuorumPeerMain", filepath.Join(s.Dir, "zoo.cfg"))
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		e.t.Fatalf("failed to start zookeeper %d: %v", s.ID, err)
	}
	s.cmd, s.done = cmd, make(chan struct{})
	go func() { _ = cmd.Wait(); log.Close(); close(s.done) }()
}

// Kill SIGKILLs server i.
func (e *Ensemble) Kill(i int) {
	s := e.Servers[i]
	if s.cmd == nil {
		return
	}
	_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
	<-s.done
	s.cmd = nil
}

// Wipe removes server i's data (it must be stopped), keeping its id.
func (e *Ensemble) Wipe(i int) {
	s := e.Servers[i]
	data := filepath.Join(s.Dir, "data")
	entries, _ := os.ReadDir(data)
	for _, en := range entries {
		if en.Name() != "myid" {
			_ = os.RemoveAll(filepath.Join(data, en.Name()))
		}
	}
}

// Mode asks server i for its mode (standalone, leader, follower) with the
// srvr four-letter word; "" when it does not serve.
func (e *Ensemble) Mode(i int) string {
	return e.Srvr(i)["Mode"]
}

// Zxid is server i's last transaction id (srvr's Zxid), or -1. Within one
// leader epoch the difference of two readings is the number of write
// transactions committed in between: an independent count of writes.
func (e *Ensemble) Zxid(i int) int64 {
	v, ok := e.Srvr(i)["Zxid"]
	if !ok {
		return -1
	}
	n, err := strconv.ParseInt(strings.TrimPrefix(v, "0x"), 16, 64)
	if err != nil {
		return -1
	}
	return n
}

// Srvr returns server i's answer to the srvr four-letter word as fields
// (Mode, Zxid, Connections, ...); empty when it does not serve.
func (e *Ensemble) Srvr(i int) map[string]string {
	out := map[string]string{}
	conn, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", e.Servers[i].ClientPort), time.Second)
	if err != nil {
		return out
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := conn.Write([]byte("srvr")); err != nil {
		return out
	}
	sc := bufio.NewScanner(conn)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ": "); ok {
			out[k] = strings.TrimSpace(v)
		}
	}
	return out
}

// WaitServing waits until server i reports a mode.
func (e *Ensemble) WaitServing(i int, timeout time.Duration) {
	e.t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if e.Mode(i) != "" {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	b, _ := os.ReadFile(filepath.Join(e.Servers[i].Dir, "server.log"))
	lines := strings.Split(string(b), "\n")
	if len(lines) > 20 {
		lines = lines[len(lines)-20:]
	}
	e.t.Fatalf("zookeeper %d not serving after %s:\n%s", e.Servers[i].ID, timeout, strings.Join(lines, "\n"))
}

// Leader is the index of the ensemble's leader, or -1.
func (e *Ensemble) Leader() int {
	for i := range e.Servers {
		if e.Mode(i) == "leader" {
			return i
		}
	}
	return -1
}

func freePorts(t TB, n int) []int {
	t.Helper()
	var ports []int
	var ls []net.Listener
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	for _, l := range ls {
		l.Close()
	}
	return ports
}

// Standalone is a TB for programs (bench commands): failures panic with the
// message, and Close runs the cleanups and removes the temporary dirs.
type Standalone struct {
	cleanups []func()
	dirs     []string
}

var _ TB = (*Standalone)(nil)

func (s *Standalone) Helper()                   {}
func (s *Standalone) Fatal(args ...any)         { panic(fmt.Sprint(args...)) }
func (s *Standalone) Fatalf(f string, a ...any) { panic(fmt.Sprintf(f, a...)) }
func (s *Standalone) Cleanup(f func())          { s.cleanups = append(s.cleanups, f) }

// TempDir returns a new temporary directory removed by Close.
func (s *Standalone) TempDir() string {
	d, err := os.MkdirTemp("", "trellis-zk-")
	if err != nil {
		panic(err)
	}
	s.dirs = append(s.dirs, d)
	return d
}

// Close runs the cleanups in reverse order and removes the temporary dirs.
func (s *Standalone) Close() {
	for i := len(s.cleanups) - 1; i >= 0; i-- {
		s.cleanups[i]()
	}
	for _, d := range s.dirs {
		_ = os.RemoveAll(d)
	}
}
