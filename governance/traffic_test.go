package governance

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/spiffe/go-spiffe/v2/spiffeid"

	"github.com/trellis-dev/trellis/daemons/certs/agent"
	"github.com/trellis-dev/trellis/daemons/certs/issuer"
	"github.com/trellis-dev/trellis/daemons/logshipper"
	"github.com/trellis-dev/trellis/daemons/zkregistrar"
	"github.com/trellis-dev/trellis/internal/pki"
	"github.com/trellis-dev/trellis/internal/serverset"
	"github.com/trellis-dev/trellis/internal/testutil/cluster"
	zktest "github.com/trellis-dev/trellis/internal/testutil/zookeeper"
)

func clientAs(t *testing.T, cfg *rest.Config, ua string) kubernetes.Interface {
	t.Helper()
	c := rest.CopyConfig(cfg)
	c.UserAgent = ua
	k, err := kubernetes.NewForConfig(c)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// TestIntegrationSteadyStateIsWatchesOnly runs every Trellis node daemon and
// the issuer against a real apiserver with an audit log, lets them reach
// steady state while pods come and go, then counts each one's requests over
// a quiet window: there must be none but watches (leader-election lease
// renewals excepted, which are the protocol). A naive client that lists is
// run beside them and must be caught, so the test can fail.
func TestIntegrationSteadyStateIsWatchesOnly(t *testing.T) {
	cp := cluster.Start(t, cluster.Options{AuditLog: true})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	admin := cp.Client
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "trellis-system"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	mkPod := func(i int) {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("p%d", i), Namespace: "default"},
			Spec: corev1.PodSpec{NodeName: "node-a", Containers: []corev1.Container{{Name: "c", Image: "c"}}}}
		if _, err := admin.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 5 {
		mkPod(i)
	}

	// The ZooKeeper registrar daemon.
	zks := zktest.Start(t, 1)
	reg := serverset.New(serverset.Config{Servers: zks.Addrs(), SessionTimeout: 4 * time.Second})
	go func() { _ = reg.Run(ctx) }()
	d, err := zkregistrar.New(zkregistrar.Config{NodeName: "node-a", Client: clientAs(t, cp.Config, "trellis-zk-registrar"), Registrar: reg})
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = d.Run(ctx) }()

	// The certificate agent's pod cache.
	a, err := agent.New(agent.Config{NodeName: "node-a", Client: clientAs(t, cp.Config, "trellis-cert-agent")})
	if err != nil {
		t.Fatal(err)
	}
	go a.Run(ctx)

	// The log shipper's metadata.
	meta := logshipper.NewPodMetadata(clientAs(t, cp.Config, "trellis-log-shipper"), "node-a")
	go meta.Run(ctx)

	// The issuer: CA secret watch and trust-bundle publisher.
	td := spiffeid.RequireTrustDomainFromString("trellis.test")
	root, _ := pki.NewRoot(td.Name(), time.Hour, time.Now())
	signer, _ := pki.NewIntermediate(root, td.Name(), time.Hour, time.Now())
	data, _ := pki.NewState(root, signer).Data()
	if _, err := admin.CoreV1().Secrets("trellis-system").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "trellis-ca", Namespace: "trellis-system"}, Data: data}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ic := clientAs(t, cp.Config, "trellis-cert-issuer")
	is := issuer.New(issuer.Config{TrustDomain: td, Client: ic}, nil)
	if err := is.WatchSecret(ctx, ic, "trellis-system", "trellis-ca", 30*time.Second); err != nil {
		t.Fatal(err)
	}
	go is.PublishBundles(ctx, ic, time.Second)

	// A naive client: lists pods every second (the control).
	naive := clientAs(t, cp.Config, "naive-lister")
	go func() {
		for ctx.Err() == nil {
			_, _ = naive.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
			time.Sleep(time.Second)
		}
	}()

	// Churn while they warm up, then a quiet window to measure.
	time.Sleep(3 * time.Second)
	for i := 5; i < 10; i++ {
		mkPod(i)
	}
	_ = admin.CoreV1().Pods("default").Delete(ctx, "p0", metav1.DeleteOptions{GracePeriodSeconds: new(int64(0))})
	time.Sleep(3 * time.Second)
	from := time.Now()
	time.Sleep(10 * time.Second)
	to := time.Now()
	time.Sleep(2 * time.Second) // the audit log is written asynchronously

	for _, ua := range []string{"trellis-zk-registrar", "trellis-cert-agent", "trellis-log-shipper", "trellis-cert-issuer", "naive-lister"} {
		evs, err := cp.ReadAudit(ua, from, to)
		if err != nil {
			t.Fatal(err)
		}
		var bad []string
		for _, e := range evs {
			if e.Verb == "watch" || e.Resource() == "leases" {
				continue
			}
			bad = append(bad, e.Verb+" "+e.Resource())
		}
		sort.Strings(bad)
		switch {
		case ua == "naive-lister" && len(bad) == 0:
			t.Errorf("the naive lister went unnoticed: the audit check sees nothing")
		case ua != "naive-lister" && len(bad) > 0:
			t.Errorf("%s made %d non-watch requests in a quiet 10 s: %s", ua, len(bad), strings.Join(bad, ", "))
		default:
			t.Logf("%s: %d requests in the quiet window, %d not watches", ua, len(evs), len(bad))
		}
	}
}
