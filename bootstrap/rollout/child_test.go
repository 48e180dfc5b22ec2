package rollout_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/kops/upup/pkg/fi/cloudup/awsup"

	"github.com/trellis-dev/trellis/bootstrap"
	"github.com/trellis-dev/trellis/bootstrap/rollout"
	"github.com/trellis-dev/trellis/bootstrap/statestore"
)

// The crash tests run the engine in a child process, this test binary
// again with childEnv set to a childConfig, and kill it with SIGKILL: the
// parent at a moment it picks, or the child itself at a kill point.
const childEnv = "TRELLIS_ROLLOUT_CHILD"

type childConfig struct {
	Emulator, CacheDir, Region string
	State, Cluster, Kubeconfig string
	Image                      string
	// Owner of the lock; each run is a new one.
	Owner string
	// Ahead: the child's clock runs this far ahead of the real one, so a
	// run starts after the lock of the run before it expired without the
	// test waiting for it.
	Ahead time.Duration
	Kill  *killPoint
}

// killPoint: the child kills itself at its Save-th write of the rollout's
// state (1 is Start's, taking the lock).
type killPoint struct {
	Save int
	// How: "mid", with the write's headers and half its body sent to the
	// emulator; "after", once the emulator stored it and before the
	// answer reaches the engine.
	How string
}

// Markers the child writes on stderr.
const (
	markerSaved  = "child: saved "   // and the write's number
	markerKilled = "child: killing " // and the kill point
)

// rolloutOptions are the options of every roller of the crash tests, in
// the parent and in the children.
func rolloutOptions(image, owner string, c rollout.Options) rollout.Options {
	c.Image, c.Owner = image, owner
	c.Groups = map[string]rollout.Strategy{"general": {MaxSurge: 2, Canary: true}, "batch": {MaxSurge: 2, Canary: true}}
	c.Budget, c.GateTimeout, c.LockTTL, c.Poll = 3, time.Minute, lockTTL, 100*time.Millisecond
	// Generous: CI runs other packages' tests beside these on 2 cores.
	c.Drain = rollout.DrainOptions{Timeout: 2 * time.Minute}
	return c
}

// runChild is the child's main: it runs (or resumes) the rollout and
// exits 0 when it is done.
func runChild(raw string) error {
	var c childConfig
	if err := json.Unmarshal([]byte(raw), &c); err != nil {
		return err
	}
	ctx := context.Background()
	emulator := c.Emulator
	var kp *killProxy
	if c.Kill != nil {
		var err error
		if kp, err = newKillProxy(c.Emulator); err != nil {
			return err
		}
		emulator = kp.url
	}
	if err := (bootstrap.Env{CacheDir: c.CacheDir, Emulator: emulator, Region: c.Region}).Setup(); err != nil {
		return err
	}
	cloud, err := awsup.NewAWSCloud(c.Region, map[string]string{awsup.TagClusterName: c.Cluster})
	if err != nil {
		return err
	}
	cs, err := statestore.Open(ctx, c.State)
	if err != nil {
		return err
	}
	vfs, err := rollout.NewVFSStore(c.State, c.Cluster)
	if err != nil {
		return err
	}
	store := &childStore{Store: vfs, kill: c.Kill, proxy: kp}
	cfg, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig)
	if err != nil {
		return err
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	kc, err := rollout.NewKubeCluster(ctx, client)
	if err != nil {
		return err
	}
	opts := rolloutOptions(c.Image, c.Owner, rollout.Options{Clock: later{d: c.Ahead}, Progress: os.Stderr})
	st, err := rollout.New(&rollout.AWSCloud{AWS: cloud, Cluster: c.Cluster, Clientset: cs}, kc, store, opts, nil).Start(ctx, c.Cluster)
	if err != nil {
		return err
	}
	if st.Status != rollout.StatusDone {
		return fmt.Errorf("rollout %s: %s", st.Status, st.Message)
	}
	return nil
}

// childStore numbers the child's writes of the state, says on stderr
// which landed, and arms the kill proxy for the write of the kill point.
type childStore struct {
	rollout.Store
	n     atomic.Int32
	kill  *killPoint
	proxy *killProxy
}

func (s *childStore) Save(ctx context.Context, st *rollout.State) error {
	n := int(s.n.Add(1))
	if s.kill != nil && n == s.kill.Save {
		s.proxy.arm(fmt.Sprintf("%s write %d", s.kill.How, n), s.kill.How)
	}
	if err := s.Store.Save(ctx, st); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "%s%d\n", markerSaved, n)
	return nil
}

// stateObject ends the path of the rollout's state in the state store.
const stateObject = "/trellis/ami-rollout.json"

// killProxy forwards the child's AWS and S3 calls to the emulator. Armed,
// it kills the child with SIGKILL in the middle of the next write of the
// rollout's state.
type killProxy struct {
	url    string
	target *url.URL
	rp     *httputil.ReverseProxy

	mu        sync.Mutex
	what, how string
}

func newKillProxy(target string) (*killProxy, error) {
	u, err := url.Parse(target)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &killProxy{url: "http://" + ln.Addr().String(), target: u, rp: httputil.NewSingleHostReverseProxy(u)}
	go func() { _ = http.Serve(ln, p) }()
	return p, nil
}

func (p *killProxy) arm(what, how string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.what, p.how = what, how
}

func (p *killProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var what, how string
	if r.Method == http.MethodPut && strings.HasSuffix(r.URL.Path, stateObject) {
		p.mu.Lock()
		what, how = p.what, p.how
		p.what, p.how = "", ""
		p.mu.Unlock()
	}
	switch how {
	case "mid":
		p.cut(r, what)
	case "after":
		rec := httptest.NewRecorder()
		p.rp.ServeHTTP(rec, r)
		die(fmt.Sprintf("%s, the emulator answered %d", what, rec.Code))
	}
	p.rp.ServeHTTP(w, r)
}

// cut sends the request's headers and the first half of its body to the
// emulator on a connection of its own, and dies: the kernel closes the
// connection with the body short of its Content-Length.
func (p *killProxy) cut(r *http.Request, what string) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		die(fmt.Sprintf("%s: reading the body: %v", what, err))
	}
	conn, err := net.Dial("tcp", p.target.Host)
	if err != nil {
		die(fmt.Sprintf("%s: %v", what, err))
	}
	var head bytes.Buffer
	fmt.Fprintf(&head, "%s %s HTTP/1.1\r\nHost: %s\r\n", r.Method, r.URL.RequestURI(), r.Host)
	h := r.Header.Clone()
	h.Del("Transfer-Encoding")
	h.Set("Content-Length", fmt.Sprint(len(body)))
	_ = h.Write(&head)
	head.WriteString("\r\n")
	if _, err := conn.Write(head.Bytes()); err != nil {
		die(fmt.Sprintf("%s: %v", what, err))
	}
	if _, err := conn.Write(body[:len(body)/2]); err != nil {
		die(fmt.Sprintf("%s: %v", what, err))
	}
	die(fmt.Sprintf("%s, %d of its %d bytes sent", what, len(body)/2, len(body)))
}

// die says where on stderr and kills the process with SIGKILL: nothing
// deferred runs, no buffer is flushed, no connection closed politely.
func die(where string) {
	fmt.Fprintf(os.Stderr, "%s%s\n", markerKilled, where)
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {}
}
