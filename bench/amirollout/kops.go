package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"

	"k8s.io/kops/pkg/apis/kops"
	"k8s.io/kops/pkg/cloudinstances"
	"k8s.io/kops/pkg/instancegroups"
	"k8s.io/kops/pkg/validation"
	"k8s.io/kops/upup/pkg/fi"

	"github.com/trellis-dev/trellis/internal/logs"
)

// realBoot is what one simulated boot stands for: an EC2 instance booting
// and its kubelet joining. kops's default intervals are scaled by it, as in
// BenchmarkKopsVsTrellis (bootstrap/rollout).
const realBoot = 3 * time.Minute

// validateCalls is what one kops cluster validation is counted as: a node
// list, a kube-system pod list and an autoscaling-group describe (a lower
// bound: pkg/validation also describes instances).
const validateCalls = 3

// kopsResult is what runKops measured.
type kopsResult struct {
	replaced int
	wall     time.Duration
	calls    int64
}

// runKops rolls every node of the fleet with kops's own
// instancegroups.RollingUpdateCluster at the defaults of `kops
// rolling-update cluster --yes` on AWS (maxSurge 1, maxUnavailable 0, one
// group at a time, validation twice after every node), its intervals scaled
// from a real boot to the simulated one. kops talks to the same simulation
// as the Trellis engine: a kops fi.Cloud (simKopsCloud), a client-go fake
// clientset whose reactors serve nodes, pods and the Eviction API (with
// the PDBs) from the simulation, and a cluster validator that fails while an
// instance of the group has not booted.
func runKops(ctx context.Context, s *sim) (kopsResult, error) {
	_ = logs.Setup(0, io.Discard)
	// `kops update cluster --yes`: new launch-template versions.
	s.mu.Lock()
	names := make([]string, 0, len(s.groups))
	for g := range s.groups {
		names = append(names, g)
		s.version[g] = "2"
	}
	sort.Strings(names)
	s.mu.Unlock()

	cluster := &kops.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "sim"}, Spec: kops.ClusterSpec{CloudProvider: kops.CloudProviderSpec{AWS: &kops.AWSSpec{}}}}
	var calls atomic.Int64
	igs := map[string]*kops.InstanceGroup{}
	list := &kops.InstanceGroupList{}
	groups := map[string]*cloudinstances.CloudInstanceGroup{}
	replaced := 0
	s.mu.Lock()
	for _, name := range names {
		g := s.groups[name]
		ig := &kops.InstanceGroup{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: kops.InstanceGroupSpec{Role: kops.InstanceGroupRoleNode, MinSize: new(int32(g.desired)), MaxSize: new(int32(g.desired))}}
		igs[name] = ig
		list.Items = append(list.Items, *ig)
		cg := &cloudinstances.CloudInstanceGroup{HumanName: name, InstanceGroup: ig, MinSize: g.desired, TargetSize: g.desired, MaxSize: g.desired}
		for _, id := range g.ids {
			if _, err := cg.NewCloudInstance(id, cloudinstances.CloudInstanceStatusNeedsUpdate, s.node(s.inst[id])); err != nil {
				s.mu.Unlock()
				return kopsResult{}, err
			}
			replaced++
		}
		groups[name] = cg
	}
	s.mu.Unlock()

	ru := &instancegroups.RollingUpdateCluster{
		Cluster: cluster, Cloud: &simKopsCloud{s: s, calls: &calls}, K8sClient: s.kopsClientset(&calls),
		ClusterValidator: simKopsValidator{s: s, igs: igs, calls: &calls}, ClusterName: "sim",
		FailOnDrainError: true, FailOnValidate: true,
		// The defaults of `kops rolling-update cluster`, scaled.
		MasterInterval: s.scaled(15 * time.Second), NodeInterval: s.scaled(15 * time.Second), BastionInterval: s.scaled(15 * time.Second),
		PostDrainDelay: s.scaled(5 * time.Second), ValidationTimeout: s.scaled(15 * time.Minute), ValidateCount: 2,
		DrainTimeout: s.scaled(15 * time.Minute), ValidateTickDuration: s.scaled(30 * time.Second), ValidateSuccessDuration: s.scaled(10 * time.Second),
	}
	ru.Options.InitDefaults()
	if err := ru.AdjustNeedUpdate(groups); err != nil {
		return kopsResult{}, err
	}
	// The drain helper prints a line per evicted pod to os.Stdout.
	stdout := os.Stdout
	devnull, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		return kopsResult{}, err
	}
	defer devnull.Close()
	os.Stdout = devnull
	start := time.Now()
	err = ru.RollingUpdate(ctx, groups, list)
	wall := time.Since(start)
	os.Stdout = stdout
	if err != nil {
		return kopsResult{}, fmt.Errorf("kops rolling update: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, in := range s.inst {
		if in.version != "2" {
			return kopsResult{}, fmt.Errorf("kops left instance %s on the old image", in.id)
		}
	}
	return kopsResult{replaced: replaced, wall: wall, calls: calls.Load()}, nil
}

func (s *sim) scaled(d time.Duration) time.Duration {
	return time.Duration(float64(d) * float64(s.boot) / float64(realBoot))
}

// node is the Node object of an instance (mu held).
func (s *sim) node(in *instance) *corev1.Node {
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: in.id, UID: types.UID(in.id), Labels: map[string]string{"kops.k8s.io/instancegroup": in.group}},
		Spec:       corev1.NodeSpec{ProviderID: "aws:///sim/" + in.id, Unschedulable: in.cordoned},
	}
	if in.tainted {
		n.Spec.Taints = []corev1.Taint{{Key: "kops.k8s.io/scheduled-for-update", Effect: corev1.TaintEffectPreferNoSchedule}}
	}
	return n
}

// simKopsCloud is the kops fi.Cloud of the simulation: the three calls a
// rolling update makes. Any other call panics on the nil interface.
type simKopsCloud struct {
	fi.Cloud
	s     *sim
	calls *atomic.Int64
}

func (c *simKopsCloud) ProviderID() kops.CloudProviderID { return kops.CloudProviderAWS }

// DetachInstance takes the instance out of its autoscaling group without
// lowering the desired capacity: the group launches a replacement while the
// detached instance keeps running (kops's surge).
func (c *simKopsCloud) DetachInstance(ci *cloudinstances.CloudInstance) error {
	c.calls.Add(1)
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	g := c.s.groups[ci.CloudInstanceGroup.HumanName]
	if !g.remove(ci.ID) {
		return fmt.Errorf("instance %s is not in %s", ci.ID, g.name)
	}
	return nil
}

// remove takes an instance out of the group's members (mu held).
func (g *group) remove(id string) bool {
	i := slices.Index(g.ids, id)
	if i < 0 {
		return false
	}
	g.ids = slices.Delete(g.ids, i, i+1)
	return true
}

// DeleteInstance terminates the instance (ec2:TerminateInstances): an
// autoscaling group replaces a terminated member, a detached one is gone.
func (c *simKopsCloud) DeleteInstance(ci *cloudinstances.CloudInstance) error {
	c.calls.Add(1)
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	c.s.groups[ci.CloudInstanceGroup.HumanName].remove(ci.ID)
	if _, ok := c.s.inst[ci.ID]; !ok {
		return fmt.Errorf("instance %s does not exist", ci.ID)
	}
	delete(c.s.inst, ci.ID)
	return nil
}

// DeregisterInstance takes the instance out of load balancers: nothing to
// do in the simulation, but one call.
func (c *simKopsCloud) DeregisterInstance(*cloudinstances.CloudInstance) error {
	c.calls.Add(1)
	return nil
}

// simKopsValidator is kops's cluster validation on the simulation: it fails
// for every instance of a group that has not booted into a Ready node.
type simKopsValidator struct {
	s     *sim
	igs   map[string]*kops.InstanceGroup
	calls *atomic.Int64
}

func (v simKopsValidator) Validate(context.Context) (*validation.ValidationCluster, error) {
	v.calls.Add(validateCalls)
	v.s.mu.Lock()
	defer v.s.mu.Unlock()
	out := &validation.ValidationCluster{}
	for name, g := range v.s.groups {
		if len(g.ids) < g.desired {
			out.Failures = append(out.Failures, &validation.ValidationError{Kind: "InstanceGroup", Name: name, Message: "below its desired size", InstanceGroup: v.igs[name]})
		}
		for _, id := range g.ids {
			if !v.s.booted(v.s.inst[id]) {
				out.Failures = append(out.Failures, &validation.ValidationError{Kind: "Machine", Name: id, Message: fmt.Sprintf("machine %s has not yet joined cluster", id), InstanceGroup: v.igs[name]})
			}
		}
	}
	return out, nil
}

// kopsClientset is a client-go fake clientset whose reactors serve what
// kops's drain and taint code asks for from the simulation: node patches
// (cordon, taint, load-balancer exclusion), pod lists by node, pod gets, and
// evictions through the PDBs. Every request counts as one API call.
func (s *sim) kopsClientset(calls *atomic.Int64) *fake.Clientset {
	cs := fake.NewClientset()
	cs.Resources = []*metav1.APIResourceList{{GroupVersion: "v1", APIResources: []metav1.APIResource{
		{Name: "pods/eviction", Kind: "Eviction", Group: "policy", Version: "v1"},
	}}}
	cs.PrependReactor("*", "*", func(a clienttesting.Action) (bool, runtime.Object, error) {
		switch {
		case a.GetResource().Resource == "nodes" && a.GetVerb() == "patch":
			return true, nil, s.patchNode(a.(clienttesting.PatchAction))
		case a.GetResource().Resource == "pods" && a.GetVerb() == "list":
			node, _ := a.(clienttesting.ListAction).GetListRestrictions().Fields.RequiresExactMatch("spec.nodeName")
			return true, s.podList(node), nil
		case a.GetResource().Resource == "pods" && a.GetVerb() == "get":
			return s.getPod(a.(clienttesting.GetAction).GetName())
		case a.GetResource().Resource == "pods" && a.GetVerb() == "create" && a.GetSubresource() == "eviction":
			return true, nil, s.evictByName(a.(clienttesting.CreateAction).GetObject().(*policyv1.Eviction).Name)
		}
		return false, nil, nil
	})
	// Counted first: prepended last.
	cs.PrependReactor("*", "*", func(clienttesting.Action) (bool, runtime.Object, error) {
		calls.Add(1)
		return false, nil, nil
	})
	return cs
}

func (s *sim) patchNode(a clienttesting.PatchAction) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	in, ok := s.inst[a.GetName()]
	if !ok {
		return apierrors.NewNotFound(schema.GroupResource{Resource: "nodes"}, a.GetName())
	}
	orig, err := json.Marshal(s.node(in))
	if err != nil {
		return err
	}
	patched, err := strategicpatch.StrategicMergePatch(orig, a.GetPatch(), corev1.Node{})
	if err != nil {
		return err
	}
	var n corev1.Node
	if err := json.Unmarshal(patched, &n); err != nil {
		return err
	}
	in.cordoned = n.Spec.Unschedulable
	in.tainted = len(n.Spec.Taints) > 0
	return nil
}

func (s *sim) podObject(p *pod) corev1.Pod {
	return corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: p.name, Namespace: "default", UID: types.UID(p.name),
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: fmt.Sprintf("svc%d", p.svc), Controller: new(true)}},
		},
		Spec:   corev1.PodSpec{NodeName: p.node},
		Status: corev1.PodStatus{Phase: corev1.PodRunning},
	}
}

func (s *sim) podList(node string) *corev1.PodList {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := &corev1.PodList{}
	for _, p := range s.onNode(node) {
		out.Items = append(out.Items, s.podObject(p))
	}
	return out
}

func (s *sim) getPod(name string) (bool, runtime.Object, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.byName[name]
	if !ok {
		return true, nil, apierrors.NewNotFound(schema.GroupResource{Resource: "pods"}, name)
	}
	o := s.podObject(p)
	return true, &o, nil
}

func (s *sim) evictByName(name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.byName[name]
	if !ok {
		return apierrors.NewNotFound(schema.GroupResource{Resource: "pods"}, name)
	}
	if !s.evict(p) {
		return apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 0)
	}
	return nil
}
