package rollout_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/kops/pkg/apis/kops"
	"k8s.io/kops/pkg/instancegroups"
	"k8s.io/kops/pkg/validation"

	"github.com/trellis-dev/trellis/bootstrap/rollout"
)

// realBoot is what one simulated boot stands for: an EC2 instance booting
// and its kubelet joining. kops's default intervals are scaled by it.
const realBoot = 3 * time.Minute

func scaled(d time.Duration) time.Duration {
	return time.Duration(float64(d) * float64(boot) / float64(realBoot))
}

// simValidator is kops's cluster validation on the simulation: every
// instance of every node group has a Ready node (the simulated kubelets run
// no control plane for kops's validator to inspect).
type simValidator struct{ e *env }

func (v simValidator) Validate(ctx context.Context) (*validation.ValidationCluster, error) {
	out := &validation.ValidationCluster{}
	for g, insts := range v.e.instances() {
		for _, in := range insts {
			n, err := v.e.c.CoreV1().Nodes().Get(ctx, "node-"+in.ID, metav1.GetOptions{})
			ready := false
			if err == nil {
				for _, c := range n.Status.Conditions {
					ready = ready || (c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue)
				}
			}
			if !ready {
				out.Failures = append(out.Failures, &validation.ValidationError{Kind: "Machine", Name: in.ID, Message: fmt.Sprintf("instance %s of %s has no Ready node", in.ID, g)})
			}
		}
	}
	return out, nil
}

// BenchmarkKopsVsTrellis replaces every node of the same simulated cluster
// (kops's AWS fake, the real apiserver, controller-manager and scheduler,
// simulated kubelets, PDBs) first with kops's own
// instancegroups.RollingUpdateCluster at its CLI defaults (intervals scaled
// from a 3-minute real boot to the simulated one), then with the Trellis
// rollout, and prints boot units per node for both. kops is sequential
// (one node, then one group, at a time), so its units per node extrapolate
// linearly to the 2,500-node fleet that bench/amirollout rolls with Trellis.
// Run with -benchtime=1x.
func BenchmarkKopsVsTrellis(b *testing.B) {
	e := newEnv(b)
	ctx := context.Background()
	nodes := 0
	for _, n := range e.groups {
		nodes += n
	}
	for range b.N {
		// kops: `kops update cluster` made a launch-template version with
		// the new image; `kops rolling-update cluster --yes` rolls it.
		for g := range e.groups {
			if _, err := e.aws.SetImage(ctx, g, newImage); err != nil {
				b.Fatal(err)
			}
		}
		cs := e.aws.Clientset
		cl, err := cs.GetCluster(ctx, e.cluster)
		if err != nil {
			b.Fatal(err)
		}
		igs, err := cs.InstanceGroupsFor(cl).List(ctx, metav1.ListOptions{})
		if err != nil {
			b.Fatal(err)
		}
		var nodeGroups []*kops.InstanceGroup
		list := &kops.InstanceGroupList{}
		for i := range igs.Items {
			if !igs.Items[i].IsControlPlane() {
				nodeGroups = append(nodeGroups, &igs.Items[i])
				list.Items = append(list.Items, igs.Items[i])
			}
		}
		groups, err := e.cloud.GetCloudGroups(cl, nodeGroups, false, nil)
		if err != nil {
			b.Fatal(err)
		}
		ru := &instancegroups.RollingUpdateCluster{
			Clientset: cs, Cluster: cl, Cloud: e.cloud, K8sClient: e.c, ClusterValidator: simValidator{e}, ClusterName: e.cluster,
			FailOnDrainError: true, FailOnValidate: true,
			NodeInterval: scaled(15 * time.Second), PostDrainDelay: scaled(5 * time.Second), ValidationTimeout: scaled(15 * time.Minute),
			ValidateCount: 2, DrainTimeout: scaled(15 * time.Minute), ValidateTickDuration: scaled(30 * time.Second), ValidateSuccessDuration: scaled(10 * time.Second),
		}
		ru.Options.InitDefaults()
		if err := ru.AdjustNeedUpdate(groups); err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		if err := ru.RollingUpdate(ctx, groups, list); err != nil {
			b.Fatalf("kops rolling update: %v", err)
		}
		kopsUnits := time.Since(start).Seconds() / boot.Seconds()
		// kops may run a group one node short (its maxUnavailable is 1):
		// only PDB violations count against it.
		e.mu.Lock()
		var kopsPDB []string
		for _, v := range e.violations {
			if strings.Contains(v, "PDB") {
				kopsPDB = append(kopsPDB, v)
			}
		}
		e.violations = nil
		e.mu.Unlock()
		e.eventually("every node on the new image", 30*time.Second, func() bool {
			for _, insts := range e.instances() {
				for _, in := range insts {
					if in.Version == "1" {
						return false
					}
				}
			}
			return true
		})

		// Trellis, on the same cluster, back onto the other image.
		kc, err := rollout.NewKubeCluster(ctx, e.c)
		if err != nil {
			b.Fatal(err)
		}
		r := rollout.New(e.aws, kc, e.store, rollout.Options{
			Image:       oldImage,
			Groups:      map[string]rollout.Strategy{"general": {MaxSurge: 2, Canary: true}, "batch": {MaxSurge: 2, Canary: true}},
			GateTimeout: 30 * time.Second, Owner: "bench", Poll: boot / 10, Drain: rollout.DrainOptions{Timeout: 30 * time.Second},
		}, nil)
		start = time.Now()
		st, err := r.Start(ctx, e.cluster)
		if err != nil || st.Status != rollout.StatusDone {
			b.Fatalf("trellis rollout: %v (%v)", err, st)
		}
		trellisUnits := time.Since(start).Seconds() / boot.Seconds()
		fmt.Printf("same %d-node cluster, boot unit %s: kops RollingUpdateCluster (CLI defaults, intervals scaled) %.1f boot units (%.2f per node); trellis ami rollout %.1f boot units; ratio %.1fx\n",
			nodes, boot, kopsUnits, kopsUnits/float64(nodes), trellisUnits, kopsUnits/trellisUnits)
		fmt.Printf("kops at 2,500 nodes (sequential): about %.0f boot units; PDB violations during kops: %d, during trellis: see below\n", kopsUnits/float64(nodes)*2500, len(kopsPDB))
		b.ReportMetric(kopsUnits/float64(nodes), "kops-units/node")
		b.ReportMetric(kopsUnits/trellisUnits, "ratio")
		e.mu.Lock()
		v := e.violations
		e.mu.Unlock()
		if len(v) > 0 {
			b.Fatalf("invariant violations: %v", v)
		}
	}
}
