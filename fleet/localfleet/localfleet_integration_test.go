package localfleet_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trellis-dev/trellis/api/v1alpha1"
	"github.com/trellis-dev/trellis/bootstrap/definition"
	"github.com/trellis-dev/trellis/controller"
	"github.com/trellis-dev/trellis/controller/inject"
	"github.com/trellis-dev/trellis/fleet"
	"github.com/trellis-dev/trellis/fleet/karmada"
	"github.com/trellis-dev/trellis/fleet/localfleet"
	"github.com/trellis-dev/trellis/internal/testutil/gen"
)

type env struct {
	t     *testing.T
	f     *localfleet.Fleet
	fleet client.Client
	cs    map[string]client.Client
}

func start(t *testing.T) *env {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "trellis-controller")
	if out, err := exec.Command("go", "build", "-o", bin, "../../cmd/trellis-controller").CombinedOutput(); err != nil {
		t.Fatalf("build trellis-controller: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	began := time.Now()
	f, err := localfleet.Up(ctx, t.TempDir(), localfleet.Options{
		Members: []*definition.ClusterDefinition{
			{Name: "east", Cloud: definition.CloudKind, Region: "us-east-1", Zones: []string{"us-east-1a", "us-east-1b"}},
			{Name: "west", Cloud: definition.CloudKind, Region: "us-west-2", Zones: []string{"us-west-2a"}},
		},
		Nodes:            2,
		ControllerBinary: bin,
		Karmada: karmada.Options{Failover: true, ControllerManagerFlags: []string{
			"--cluster-failure-threshold=4s", "--cluster-success-threshold=4s", "--cluster-monitor-grace-period=20s",
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
	t.Logf("local fleet of 2 members up in %s", time.Since(began).Round(time.Millisecond))
	e := &env{t: t, f: f, cs: map[string]client.Client{}}
	if e.fleet, err = client.New(f.Karmada.Config, client.Options{Scheme: controller.Scheme()}); err != nil {
		t.Fatal(err)
	}
	for _, m := range f.Members {
		if e.cs[m.Name], err = client.New(m.Config, client.Options{Scheme: controller.Scheme()}); err != nil {
			t.Fatal(err)
		}
	}
	return e
}

func (e *env) eventually(what string, timeout time.Duration, cond func(ctx context.Context) (bool, error)) time.Duration {
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
	for _, ns := range []string{"shop", "batch", "burst", inject.ProfileNamespace} {
		if err := e.fleet.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	e.place(ctx, `apiVersion: fleet.trellis.dev/v1alpha1
kind: Placement
metadata: {name: web, namespace: shop}
spec:
  spread: weighted
  weights: {east: 2, west: 1}
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
	t.Run("member-owned replicas", func(t *testing.T) { e.t = t; e.memberOwned(ctx) })
	t.Run("controller-manager killed mid-propagation", func(t *testing.T) { e.t = t; e.killController(ctx) })
	t.Run("failover and return", func(t *testing.T) { e.t = t; e.failover(ctx) })
}

// weights: a TrellisService of 6 divided 2:1, Ready in the fleet once the
// members' controllers have made it Ready.
func (e *env) weights(ctx context.Context) {
	t := e.t
	web := gen.Service("web", gen.WithNamespace("shop"), gen.WithReplicas(6))
	web.UID = ""
	if err := e.fleet.Create(ctx, web); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(web)
	took := e.eventually("web divided 4/2 and Ready in the fleet", 2*time.Minute, func(ctx context.Context) (bool, error) {
		east, err := e.memberReplicas(ctx, "east", key)
		if err != nil {
			return false, err
		}
		west, err := e.memberReplicas(ctx, "west", key)
		if err != nil {
			return false, err
		}
		got := &v1alpha1.TrellisService{}
		if err := e.fleet.Get(ctx, key, got); err != nil {
			return false, err
		}
		ready := meta.IsStatusConditionTrue(got.Status.Conditions, v1alpha1.ConditionReady)
		if east != 4 || west != 2 || !ready || got.Status.ReadyReplicas != 6 || got.Status.ObservedGeneration != got.Generation {
			return false, fmt.Errorf("east %d west %d, fleet status %+v", east, west, got.Status)
		}
		return true, nil
	})
	t.Logf("web: apply at the fleet -> 6 replicas Ready in 2 members in %s", took.Round(time.Millisecond))
	for _, m := range []string{"east", "west"} {
		d := &appsv1.Deployment{}
		if err := e.cs[m].Get(ctx, key, d); err != nil {
			t.Fatalf("%s: the member's controller made no Deployment: %v", m, err)
		}
	}
}
