package localfleet_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/go-zookeeper/zk"

	"github.com/trellis-dev/trellis/api/v1alpha1"
	"github.com/trellis-dev/trellis/bootstrap/definition"
	"github.com/trellis-dev/trellis/controller"
	"github.com/trellis-dev/trellis/fleet"
	"github.com/trellis-dev/trellis/fleet/karmada"
	"github.com/trellis-dev/trellis/fleet/localfleet"
	"github.com/trellis-dev/trellis/internal/testutil/gen"
	"github.com/trellis-dev/trellis/internal/testutil/zookeeper"
)

type env struct {
	t       *testing.T
	f       *localfleet.Fleet
	fleet   client.Client
	cs      map[string]client.Client
	members []string
	zk      *zk.Conn
	// services is how many services the controller-manager kill covers.
	services int
}

// The members a fleet test may have: make test runs the first two,
// make test-fleet FLEET_MEMBERS of them.
var memberDefs = []*definition.ClusterDefinition{
	{Name: "east", Cloud: definition.CloudKind, Region: "us-east-1", Zones: []string{"us-east-1a", "us-east-1b"}},
	{Name: "west", Cloud: definition.CloudKind, Region: "us-west-2", Zones: []string{"us-west-2a"}},
	{Name: "central", Cloud: definition.CloudKind, Region: "eu-central-1", Zones: []string{"eu-central-1a"}},
	{Name: "south", Cloud: definition.CloudKind, Region: "sa-east-1", Zones: []string{"sa-east-1a"}},
}

func envInt(t *testing.T, name string, def, lo, hi int) int {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < lo || n > hi {
		t.Fatalf("%s=%q: want a number from %d to %d", name, v, lo, hi)
	}
	return n
}

func build(t *testing.T, cmd string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), cmd)
	if out, err := exec.Command("go", "build", "-o", bin, "../../cmd/"+cmd).CombinedOutput(); err != nil {
		t.Fatalf("build %s: %v\n%s", cmd, err, out)
	}
	return bin
}

func start(t *testing.T) *env {
	t.Helper()
	n := envInt(t, "FLEET_MEMBERS", 2, 2, len(memberDefs))
	e := &env{t: t, cs: map[string]client.Client{}, services: envInt(t, "FLEET_SERVICES", 10, 2, 1000)}
	ensemble := zookeeper.Start(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	began := time.Now()
	f, err := localfleet.Up(ctx, t.TempDir(), localfleet.Options{
		Members: memberDefs[:n],
		// Room for every service's pods: kwok nodes of 64 cores, 110 pods.
		Nodes:            2 + e.services/100,
		NodeCPU:          "64",
		NodeMemory:       "256Gi",
		ControllerBinary: build(t, "trellis-controller"),
		ZooKeeper:        ensemble.Addrs(),
		RegistrarBinary:  build(t, "trellis-zk-registrar"),
		Karmada: karmada.Options{Failover: true, ControllerManagerFlags: []string{
			fmt.Sprintf("--cluster-failure-threshold=%s", failureThreshold), "--cluster-success-threshold=4s", "--cluster-monitor-grace-period=20s",
		}},
		Log: slog.New(slog.NewTextHandler(os.Stderr, nil)),
	})
	if f != nil {
		t.Cleanup(func() {
			if t.Failed() {
				t.Log(f.Karmada.Logs(40))
				for _, m := range f.Members {
					if m != nil {
						t.Logf("member %s:\n%s", m.Name, m.Logs(15))
					}
				}
			}
			f.Stop()
		})
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("local fleet of %d members up in %s", n, time.Since(began).Round(time.Millisecond))
	e.f = f
	if e.zk, _, err = zk.Connect(ensemble.Addrs(), 10*time.Second, zk.WithLogInfo(false)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.zk.Close)
	if e.fleet, err = client.New(f.Karmada.Config, client.Options{Scheme: controller.Scheme()}); err != nil {
		t.Fatal(err)
	}
	for _, m := range f.Members {
		if e.cs[m.Name], err = client.New(m.Config, client.Options{Scheme: controller.Scheme()}); err != nil {
			t.Fatal(err)
		}
		e.members = append(e.members, m.Name)
	}
	return e
}

// eventually polls cond until it holds; otherwise it runs explain (if
// given) and fails the test with cond's last error.
func (e *env) eventually(what string, timeout time.Duration, cond func(ctx context.Context) (bool, error), explain ...func()) time.Duration {
	e.t.Helper()
	began := time.Now()
	var last error
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		ok, err := cond(ctx)
		if ok {
			return true, nil
		}
		if err != nil {
			if ctx.Err() == nil {
				last = err
			}
			return false, nil
		}
		return ok, nil
	})
	if err != nil {
		for _, f := range explain {
			f()
		}
		e.t.Fatalf("%s: not within %s (last: %v)", what, timeout, last)
	}
	return time.Since(began)
}

func (e *env) place(ctx context.Context, yaml string) {
	e.t.Helper()
	ps, err := fleet.DecodePlacements("test.yaml", []byte(yaml))
	if err != nil {
		e.t.Fatal(err)
	}
	if _, err := fleet.Place(ctx, e.f.Karmada.Config, ps); err != nil {
		e.t.Fatal(err)
	}
}

// memberReplicas is spec.replicas of the member's copy of a TrellisService
// (-1: none there).
func (e *env) memberReplicas(ctx context.Context, member string, key client.ObjectKey) (int32, error) {
	ts := &v1alpha1.TrellisService{}
	if err := e.cs[member].Get(ctx, key, ts); err != nil {
		if client.IgnoreNotFound(err) == nil {
			return -1, nil
		}
		return 0, err
	}
	return *ts.Spec.Replicas, nil
}

// The reduced fleet test (make test): two members with kwok nodes and their
// own trellis-controller under one Karmada. Every Trellis kind propagates
// and reports the members' status; weights divide replicas; a field a
// member owns is not reverted; a Karmada controller-manager killed
// mid-propagation loses and duplicates nothing; a member whose apiserver
// stops has its replicas rescheduled, and its return moves nothing back.
func TestIntegrationFleet(t *testing.T) {
	e := start(t)
	ctx := context.Background()
	for _, ns := range []string{"shop", "batch", "burst"} {
		if err := e.fleet.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	weights := "east: 2"
	for _, m := range e.members[1:] {
		weights += ", " + m + ": 1"
	}
	e.place(ctx, `apiVersion: fleet.trellis.dev/v1alpha1
kind: Placement
metadata: {name: web, namespace: shop}
spec:
  spread: weighted
  weights: {`+weights+`}
  failoverAfter: 5s
---
apiVersion: fleet.trellis.dev/v1alpha1
kind: Placement
metadata: {name: batch, namespace: batch}
spec:
  minClusters: 2
---
apiVersion: fleet.trellis.dev/v1alpha1
kind: Placement
metadata: {name: agents, namespace: trellis-system}
spec:
  workloads: [{kind: TrellisDaemon}]
---
apiVersion: fleet.trellis.dev/v1alpha1
kind: Placement
metadata: {name: burst, namespace: burst}
spec:
  spread: duplicated
`)
	t.Run("weights", func(t *testing.T) { e.t = t; e.weights(ctx) })
	t.Run("every kind", func(t *testing.T) { e.t = t; e.everyKind(ctx) })
	t.Run("health and dependencies", func(t *testing.T) { e.t = t; e.health(ctx) })
	t.Run("member-owned replicas", func(t *testing.T) { e.t = t; e.memberOwned(ctx) })
	t.Run("federated quota", func(t *testing.T) { e.t = t; e.federatedQuota(ctx) })
	t.Run("controller-manager killed mid-propagation", func(t *testing.T) { e.t = t; e.killController(ctx) })
	// make test fails one member over; make test-fleet each in turn.
	victims := e.members[:1]
	if os.Getenv("FLEET_MEMBERS") != "" {
		victims = e.members
	}
	for _, v := range victims {
		t.Run("failover and return of "+v, func(t *testing.T) { e.t = t; e.failover(ctx, v) })
	}
}

// webReplicas is web's replicas in the fleet: 2 per unit of weight (east
// 2, the others 1), so east runs 4 and every other member 2.
func (e *env) webReplicas() int32 { return int32(2 * (len(e.members) + 1)) }

// weights: web divided by weight, Ready in the fleet once the members'
// controllers have made it Ready, its pods in one ZooKeeper serverset.
func (e *env) weights(ctx context.Context) {
	t := e.t
	total := e.webReplicas()
	web := gen.Service("web", gen.WithNamespace("shop"), gen.WithReplicas(total))
	web.UID = ""
	if err := e.fleet.Create(ctx, web); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(web)
	took := e.eventually("web divided by weight and Ready in the fleet", 2*time.Minute, func(ctx context.Context) (bool, error) {
		for _, m := range e.members {
			n, err := e.memberReplicas(ctx, m, key)
			if err != nil {
				return false, err
			}
			if want := map[bool]int32{true: 4, false: 2}[m == "east"]; n != want {
				return false, fmt.Errorf("%s runs %d, want %d", m, n, want)
			}
		}
		got := &v1alpha1.TrellisService{}
		if err := e.fleet.Get(ctx, key, got); err != nil {
			return false, err
		}
		ready := meta.IsStatusConditionTrue(got.Status.Conditions, v1alpha1.ConditionReady)
		if !ready || got.Status.ReadyReplicas != total || got.Status.ObservedGeneration != got.Generation {
			return false, fmt.Errorf("fleet status %+v", got.Status)
		}
		return true, nil
	})
	t.Logf("web: apply at the fleet -> %d replicas Ready in %d members in %s", total, len(e.members), took.Round(time.Millisecond))
	// One discovery view: every member's registrars put web's pods in the
	// same serverset.
	e.eventually("web's serverset holds every member's pods", time.Minute, func(ctx context.Context) (bool, error) {
		members, err := e.serverset("web")
		if err != nil {
			return false, err
		}
		nets := map[string]int{}
		for _, m := range members {
			nets[strings.Join(strings.Split(m.ServiceEndpoint.Host, ".")[:2], ".")]++
		}
		return len(members) == int(total) && len(nets) == len(e.members), fmt.Errorf("%d members from pod networks %v", len(members), nets)
	})
	for _, m := range e.members {
		d := &appsv1.Deployment{}
		if err := e.cs[m].Get(ctx, key, d); err != nil {
			t.Fatalf("%s: the member's controller made no Deployment: %v", m, err)
		}
	}
}
