package certs_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	"github.com/trellis-dev/trellis/daemons/certs/agent"
	"github.com/trellis-dev/trellis/internal/certsapi"
	"github.com/trellis-dev/trellis/internal/nodepods"
	"github.com/trellis-dev/trellis/internal/pki"
	"github.com/trellis-dev/trellis/sidecars/certs"
)

// delayedLW delivers watch events late: an agent whose cache lags the
// apiserver, as it does for a pod that started a moment ago.
type delayedLW struct {
	lw    cache.ListerWatcherWithContext
	delay time.Duration
}

// List and Watch complete cache.ListerWatcher, which the informer takes; its
// reflector calls the context-aware methods.
func (d delayedLW) List(o metav1.ListOptions) (runtime.Object, error) {
	return d.ListWithContext(context.Background(), o)
}

func (d delayedLW) Watch(o metav1.ListOptions) (watch.Interface, error) {
	return d.WatchWithContext(context.Background(), o)
}

func (d delayedLW) ListWithContext(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
	return d.lw.ListWithContext(ctx, o)
}

func (d delayedLW) WatchWithContext(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
	w, err := d.lw.WatchWithContext(ctx, o)
	if err != nil {
		return nil, err
	}
	out := make(chan watch.Event, 1000)
	stop := make(chan struct{})
	go func() {
		defer close(out)
		for ev := range w.ResultChan() {
			at := time.Now().Add(d.delay)
			select {
			case <-time.After(time.Until(at)):
			case <-stop:
				return
			}
			out <- ev
		}
	}()
	return &delayedWatch{w: w, out: out, stop: stop}, nil
}

type delayedWatch struct {
	w    watch.Interface
	out  chan watch.Event
	stop chan struct{}
	once sync.Once
}

func (d *delayedWatch) Stop()                          { d.once.Do(func() { close(d.stop); d.w.Stop() }) }
func (d *delayedWatch) ResultChan() <-chan watch.Event { return d.out }

// TestIntegrationStartupRaceAndRateLimit: a pod whose object reaches the
// agent's cache after its first request is served once it arrives (within
// the bound); a pod over its rate limit gets 429.
func TestIntegrationStartupRaceAndRateLimit(t *testing.T) {
	e := newEnv(t, time.Hour)
	cfg := e.agentCfg
	cfg.ListWatch = delayedLW{lw: cache.NewListWatchFromClient(e.c.CoreV1().RESTClient(), "pods", metav1.NamespaceAll,
		nodepods.Selector("node-a")), delay: 1500 * time.Millisecond}
	cfg.AttestTimeout, cfg.PodRate, cfg.PodBurst = 5*time.Second, 1, 3
	a, err := agent.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go a.Run(ctx)
	e.eventually("delayed agent cache", 10*time.Second, a.HasSynced)
	socket := filepath.Join(e.dir, "slow.sock")
	go func() { _ = a.Serve(ctx, socket) }()
	e.eventually("delayed agent socket", 5*time.Second, func() bool { return e.callable(socket) })

	race := e.pod(ns, "race-1", "web", "node-a", "web")
	got := e.callAs(race.UID, socket, 1)[0]
	fields := strings.Fields(got)
	ms, _ := strconv.Atoi(fields[1])
	if fields[0] != "200" || ms < 1000 {
		t.Fatalf("a request racing its pod into the cache: %s; want 200 after waiting >= 1s for the cache", got)
	}
	t.Logf("start-up race: served after %d ms (cache delay 1.5 s)", ms)

	codes := e.callAs(e.pods["web-1"].UID, socket, 8)
	var ok, limited int
	for _, c := range codes {
		switch {
		case strings.HasPrefix(c, "200 "):
			ok++
		case strings.HasPrefix(c, "429 "):
			limited++
		}
	}
	if ok < 3 || ok > 4 || limited < 4 {
		t.Fatalf("8 quick requests at 1/s burst 3: %d served, %d limited; want 3-4 and the rest 429\n%s", ok, limited, strings.Join(codes, "\n"))
	}
}

// callable reports whether the agent at socket answers.
func (e *env) callable(socket string) bool {
	out, err := e.inPod("", "call", socket, "1").CombinedOutput()
	return err == nil && strings.HasPrefix(string(out), "403 ")
}

// TestIntegrationIssuerRefusals: the issuer, not the agent, has the last
// word: an agent cannot get a certificate for a pod on another node, and
// only agents' tokens are accepted.
func TestIntegrationIssuerRefusals(t *testing.T) {
	e := newEnv(t, time.Hour)
	post := func(token string, req certsapi.SignRequest) (int, string) {
		t.Helper()
		body, _ := json.Marshal(req)
		r, _ := http.NewRequest(http.MethodPost, e.url+certsapi.SignPath, bytes.NewReader(body))
		if token != "" {
			r.Header.Set("Authorization", "Bearer "+token)
		}
		c := &http.Client{Transport: &http.Transport{TLSClientConfig: e.agentCfg.IssuerTLS}}
		resp, err := c.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out certsapi.Error
		_ = json.NewDecoder(resp.Body).Decode(&out)
		return resp.StatusCode, out.Error
	}
	csr := newCSR(t)
	far, web := e.pods["far-1"], e.pods["web-1"]
	webToken := e.token(ns, "web", web)
	for _, tc := range []struct {
		name   string
		token  string
		req    certsapi.SignRequest
		status int
		msg    string
	}{
		{"the agent's own node", e.agentToken, certsapi.SignRequest{Namespace: ns, Name: "web-1", UID: string(web.UID), CSR: csr}, 200, ""},
		{"a pod on another node", e.agentToken, certsapi.SignRequest{Namespace: ns, Name: "far-1", UID: string(far.UID), CSR: csr}, 403, "not on the agent's node"},
		{"a stale UID", e.agentToken, certsapi.SignRequest{Namespace: ns, Name: "web-1", UID: "0d7e3b4a-3c4f-4bb1-9a57-3a8e6c1f0f00", CSR: csr}, 403, "has UID"},
		{"no such pod", e.agentToken, certsapi.SignRequest{Namespace: ns, Name: "ghost", UID: "x", CSR: csr}, 403, "does not exist"},
		{"a workload's token", webToken, certsapi.SignRequest{Namespace: ns, Name: "web-1", UID: string(web.UID), CSR: csr}, 403, "is not a certificate agent"},
		{"no token", "", certsapi.SignRequest{Namespace: ns, Name: "web-1", UID: string(web.UID), CSR: csr}, 401, "no bearer token"},
		{"a garbage token", "not-a-token", certsapi.SignRequest{Namespace: ns, Name: "web-1", UID: string(web.UID), CSR: csr}, 401, "not authenticated"},
		{"a garbage CSR", e.agentToken, certsapi.SignRequest{Namespace: ns, Name: "web-1", UID: string(web.UID), CSR: []byte("junk")}, 400, "CERTIFICATE REQUEST"},
	} {
		status, msg := post(tc.token, tc.req)
		if status != tc.status || !strings.Contains(msg, tc.msg) {
			t.Errorf("%s: %d %q, want %d containing %q", tc.name, status, msg, tc.status, tc.msg)
		}
	}
	// The fixed-name wire format cannot claim another identity: the ID
	// comes from the pod object.
	if id, _, err := e.is.Identity(far); err != nil || id.String() != "spiffe://trellis.test/ns/shop/sa/web" {
		t.Errorf("identity of far-1: %v %v", id, err)
	}
}

// TestIntegrationRenewalFaults: the issuer down across a renewal and an
// agent restart; the pod's certificate stays valid throughout and is
// renewed once they are back.
func TestIntegrationRenewalFaults(t *testing.T) {
	const ttl = 12 * time.Second
	e := newEnv(t, ttl)
	dir := e.sidecar("web-1")
	first := waitIdentity(t, dir)

	var mu sync.Mutex
	var invalid []string
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			if err := certs.Check(dir, time.Now()); err != nil {
				mu.Lock()
				invalid = append(invalid, err.Error())
				mu.Unlock()
			}
		}
	})
	notAfter := func() time.Time {
		id, err := certs.Load(dir)
		if err != nil {
			return time.Time{}
		}
		return id.Chain[0].NotAfter
	}

	// The issuer goes down right after an issuance and stays down past
	// the renewal point (2/3 of 12 s = 8 s), then returns at 10 s.
	e.issuer.Stop()
	time.Sleep(10 * time.Second)
	if !notAfter().Equal(first.Chain[0].NotAfter) {
		t.Fatal("the certificate changed while the issuer was down")
	}
	e.issuer.Start()
	e.eventually("renewal after the issuer returned", ttl, func() bool { return notAfter().After(first.Chain[0].NotAfter) })
	renewed := notAfter()

	// The agent restarts; the next renewal goes through the new one.
	e.stopAgent()
	time.Sleep(time.Second)
	e.startAgent()
	e.eventually("renewal through the restarted agent", ttl, func() bool { return notAfter().After(renewed) })

	close(stop)
	wg.Wait()
	if len(invalid) > 0 {
		t.Fatalf("the certificate was invalid %d times, first: %s", len(invalid), invalid[0])
	}
}

// TestIntegrationCARotation: clients keep reconnecting over mTLS while the
// CA rotates (trust the new root, sign with it, distrust the old one); not
// one handshake may fail.
func TestIntegrationCARotation(t *testing.T) {
	const ttl = 6 * time.Second
	e := newEnv(t, ttl)
	webDir, dbDir := e.sidecar("web-1"), e.sidecar("db-1")
	waitIdentity(t, webDir)
	waitIdentity(t, dbDir)
	addr := mtlsServer(t, webDir, dbID)
	dbSrc, err := certs.NewSource(dbDir)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var okN int
	var fails []string
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				err := dial(dbSrc, addr, webID, nil)
				mu.Lock()
				if err != nil {
					fails = append(fails, time.Now().Format("15:04:05.000")+" "+err.Error())
				} else {
					okN++
				}
				mu.Unlock()
				time.Sleep(10 * time.Millisecond)
			}
		})
	}
	roots := func(dir string) int {
		id, err := certs.Load(dir)
		if err != nil {
			return -1
		}
		return len(id.Roots)
	}
	signedBy := func(dir string, signer *pki.KeyPair) bool {
		id, err := certs.Load(dir)
		return err == nil && len(id.Chain) > 1 && id.Chain[1].Equal(signer.Cert)
	}
	time.Sleep(time.Second)
	st := e.is.State()
	newRoot, err := pki.NewRoot(td.Name(), 24*time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	newSigner, err := pki.NewIntermediate(newRoot, td.Name(), 12*time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}

	// 1. Trust the new root; wait until every pod and the agent hold it.
	st = st.Trust(newRoot.Cert)
	e.putCA(st)
	e.eventually("both roots everywhere", 20*time.Second, func() bool {
		b, _ := certs.Load(dbDir)
		return roots(webDir) == 2 && roots(dbDir) == 2 && b != nil && strings.Count(readFile(t, e.bundle), "BEGIN CERTIFICATE") == 2
	})
	// 2. Sign with the new CA; wait until every pod renewed under it.
	st, err = st.Use(newSigner)
	if err != nil {
		t.Fatal(err)
	}
	e.putCA(st)
	used := time.Now()
	e.eventually("every pod renewed under the new CA", 3*ttl, func() bool { return signedBy(webDir, newSigner) && signedBy(dbDir, newSigner) })
	// 3. Once every old leaf has expired, distrust the old root.
	time.Sleep(time.Until(used.Add(ttl + time.Second)))
	st, err = st.Distrust(e.root.Cert)
	if err != nil {
		t.Fatal(err)
	}
	e.putCA(st)
	e.eventually("only the new root everywhere", 20*time.Second, func() bool {
		return roots(webDir) == 1 && roots(dbDir) == 1 && strings.Count(readFile(t, e.bundle), "BEGIN CERTIFICATE") == 1
	})
	time.Sleep(2 * time.Second) // traffic on the new CA alone
	close(stop)
	wg.Wait()
	if len(fails) > 0 {
		t.Fatalf("%d of %d handshakes failed during the rotation; first: %s", len(fails), okN+len(fails), fails[0])
	}
	if okN < 200 {
		t.Fatalf("only %d handshakes: the test did not exercise the rotation", okN)
	}
	t.Logf("%d handshakes through a full CA rotation, none failed", okN)
}
