// Command amirollout runs the real rollout engine (bootstrap/rollout) on a
// simulated fleet: 2,500 nodes in 4 instance groups, 35,000 pods in 500
// services each with a PodDisruptionBudget (at most 10% unavailable), and a
// simulated boot time. It prints the wall time in boot units, the API calls
// per replaced node, and checks that no PDB was ever violated. The cloud and
// the cluster are in-memory simulations: the engine is the one `trellis ami
// rollout` runs. Then it rolls a fresh copy of the same fleet with kops's own
// instancegroups.RollingUpdateCluster (kops.go) and prints the ratio.
package main

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/trellis-dev/trellis/bootstrap/rollout"
)

func main() {
	nodes := flag.Int("nodes", 2500, "nodes")
	groups := flag.Int("groups", 4, "instance groups")
	pods := flag.Int("pods", 35000, "pods")
	services := flag.Int("services", 500, "services (one PDB each, 10% unavailable)")
	boot := flag.Duration("boot", 100*time.Millisecond, "simulated boot time (one boot unit)")
	surge := flag.Float64("surge", 0.10, "maxSurge per group, as a fraction of the group")
	budget := flag.Int("budget", 0, "nodes surged at once across groups (default: the sum)")
	withKops := flag.Bool("kops", true, "also roll the same fleet with kops's RollingUpdateCluster (about 1.4 boot units per node)")
	flag.Parse()
	f := fleet{nodes: *nodes, groups: *groups, pods: *pods, services: *services, boot: *boot}
	if err := run(f, *surge, *budget, *withKops); err != nil {
		fmt.Fprintf(os.Stderr, "amirollout: %v\n", err)
		os.Exit(1)
	}
}

// fleet is the simulated cluster both rollouts start from.
type fleet struct {
	nodes, groups, pods, services int
	boot                          time.Duration
}

// pdbBudget is how many pods of one service its PDB lets be down.
func (f fleet) pdbBudget() int64 { return int64(max(1, f.pods/f.services/10)) }

// build boots the fleet and places its pods.
func (f fleet) build() *sim {
	s := newSim(f.boot)
	for g := range f.groups {
		s.addGroup(fmt.Sprintf("group-%d", g), f.nodes/f.groups)
	}
	s.waitBooted(f.groups * (f.nodes / f.groups))
	s.placePods(f.pods, f.services)
	return s
}

func run(f fleet, surge float64, budget int, withKops bool) error {
	ctx := context.Background()
	sim := f.build()
	per := f.nodes / f.groups
	fmt.Printf("fleet: %d nodes in %d groups, %d pods in %d services with PDBs (maxUnavailable 10%%); boot unit %s\n", f.nodes, f.groups, f.pods, f.services, f.boot)

	strategies := map[string]rollout.Strategy{}
	for g := range f.groups {
		strategies[fmt.Sprintf("group-%d", g)] = rollout.Strategy{MaxSurge: max(1, int(float64(per)*surge)), Canary: true}
	}
	r := rollout.New(sim, sim, &memStore{}, rollout.Options{
		Image: "ami-new", Groups: strategies, Budget: budget, GateTimeout: 50 * f.boot, Owner: "bench", Poll: f.boot / 20,
		Drain: rollout.DrainOptions{Timeout: 100 * f.boot},
	}, nil)
	start := time.Now()
	st, err := r.Start(ctx, "sim")
	if err != nil {
		return err
	}
	wall := time.Since(start)
	replaced := 0
	for _, g := range st.Groups {
		replaced += len(g.Replaced)
	}
	units := wall.Seconds() / f.boot.Seconds()
	fmt.Printf("trellis ami rollout: %d nodes replaced in %.1f boot units (%s), %.1f API calls (cloud and Kubernetes) per replaced node, max pods of one service down at once: %d (its PDB allows %d), evictions refused by PDBs: %d\n",
		replaced, units, wall.Round(time.Millisecond), float64(sim.calls.Load())/float64(replaced), sim.maxDown.Load(), f.pdbBudget(), sim.refused.Load())
	if sim.maxDown.Load() > f.pdbBudget() {
		return fmt.Errorf("trellis violated a PDB: %d pods of one service down", sim.maxDown.Load())
	}
	if !withKops {
		return nil
	}

	ks := f.build()
	kr, err := runKops(ctx, ks)
	if err != nil {
		return err
	}
	kunits := kr.wall.Seconds() / f.boot.Seconds()
	fmt.Printf("kops RollingUpdateCluster (AWS defaults: maxSurge 1, one group at a time; intervals scaled from a %s boot): %d nodes replaced in %.1f boot units (%s, %.2f per node), %.1f API calls per replaced node, max pods of one service down at once: %d (its PDB allows %d), evictions refused by PDBs: %d\n",
		realBoot, kr.replaced, kunits, kr.wall.Round(time.Millisecond), kunits/float64(kr.replaced), float64(kr.calls)/float64(kr.replaced), ks.maxDown.Load(), f.pdbBudget(), ks.refused.Load())
	fmt.Printf("ratio (kops time / trellis time) on the same %d-node simulation: %.1fx\n", f.nodes, kunits/units)
	if ks.maxDown.Load() > f.pdbBudget() {
		return fmt.Errorf("kops violated a PDB: %d pods of one service down", ks.maxDown.Load())
	}
	return nil
}

// sim is both the cloud and the cluster.
type sim struct {
	boot time.Duration

	mu       sync.Mutex
	groups   map[string]*group
	inst     map[string]*instance // by id
	pods     []*pod
	bySvc    map[int][]*pod
	byName   map[string]*pod
	n, gen   int
	version  map[string]string // group -> current launch template version
	replicas int

	calls   atomic.Int64
	maxDown atomic.Int64
	refused atomic.Int64 // evictions the PDBs refused
}

type group struct {
	name    string
	desired int
	ids     []string
}

type instance struct {
	id, group, version string
	launched           time.Time
	cordoned, tainted  bool
}

type pod struct {
	name  string
	svc   int
	node  string // instance id
	ready time.Time
}

func newSim(boot time.Duration) *sim {
	s := &sim{boot: boot, groups: map[string]*group{}, inst: map[string]*instance{}, bySvc: map[int][]*pod{}, byName: map[string]*pod{}, version: map[string]string{}}
	go s.autoscaler()
	return s
}

func (s *sim) addGroup(name string, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.groups[name] = &group{name: name, desired: n}
	s.version[name] = "1"
}

// autoscaler launches instances up to each group's desired capacity.
func (s *sim) autoscaler() {
	for {
		s.mu.Lock()
		for _, g := range s.groups {
			for len(g.ids) < g.desired {
				s.n++
				id := fmt.Sprintf("i-%06d", s.n)
				s.inst[id] = &instance{id: id, group: g.name, version: s.version[g.name], launched: time.Now()}
				g.ids = append(g.ids, id)
			}
		}
		s.mu.Unlock()
		time.Sleep(s.boot / 50)
	}
}

func (s *sim) booted(in *instance) bool { return time.Since(in.launched) >= s.boot }

func (s *sim) waitBooted(n int) {
	for {
		s.mu.Lock()
		c := 0
		for _, in := range s.inst {
			if s.booted(in) {
				c++
			}
		}
		s.mu.Unlock()
		if c >= n {
			return
		}
		time.Sleep(s.boot / 10)
	}
}

// placePods spreads the pods over the nodes at random (a fixed seed), as a
// scheduler spreading each service would: a node holds pods of many
// services, so draining it takes a small share of each service's budget.
func (s *sim) placePods(n, services int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ids := make([]string, 0, len(s.inst))
	for id := range s.inst {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	rnd := rand.New(rand.NewPCG(1, 2))
	s.replicas = n / services
	for i := range n {
		s.gen++
		p := &pod{svc: i % services, node: ids[rnd.IntN(len(ids))], name: fmt.Sprintf("svc%d-%d", i%services, s.gen)}
		s.pods = append(s.pods, p)
		s.byName[p.name] = p
		s.bySvc[p.svc] = append(s.bySvc[p.svc], p)
	}
}

// Cloud.

func (s *sim) ResolveImage(context.Context, string) (string, error) {
	s.calls.Add(1)
	return "ami-new", nil
}

func (s *sim) Instances(_ context.Context, group string) ([]rollout.Instance, int, error) {
	s.calls.Add(1)
	s.mu.Lock()
	defer s.mu.Unlock()
	g := s.groups[group]
	out := make([]rollout.Instance, 0, len(g.ids))
	for _, id := range g.ids {
		out = append(out, rollout.Instance{ID: id, Version: s.inst[id].version})
	}
	return out, g.desired, nil
}

// InstanceImages is one DescribeInstances page per 1,000 instances: version
// 2 runs the new image.
func (s *sim) InstanceImages(_ context.Context, ids []string) (map[string]string, error) {
	s.calls.Add(int64((len(ids) + 999) / 1000))
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]string, len(ids))
	for _, id := range ids {
		if in, ok := s.inst[id]; ok {
			out[id] = "ami-old"
			if in.version == "2" {
				out[id] = "ami-new"
			}
		}
	}
	return out, nil
}

func (s *sim) SetImage(_ context.Context, group, _ string) (rollout.ImageChange, error) {
	s.calls.Add(2)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.version[group] == "1" {
		s.version[group] = "2"
	}
	return rollout.ImageChange{PrevVersion: "1", PrevImage: "ami-old", NewVersion: "2"}, nil
}

func (s *sim) SetDesired(_ context.Context, group string, n int) error {
	s.calls.Add(1)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.groups[group].desired = n
	return nil
}

func (s *sim) Terminate(_ context.Context, group, id string) error {
	s.terminate(group, id, true)
	return nil
}

func (s *sim) Replace(_ context.Context, group, id string) error {
	s.terminate(group, id, false)
	return nil
}

// terminate removes an instance, and with decrement one unit of capacity.
func (s *sim) terminate(group, id string, decrement bool) {
	s.calls.Add(1)
	s.mu.Lock()
	defer s.mu.Unlock()
	g := s.groups[group]
	if i := slices.Index(g.ids, id); i >= 0 {
		g.ids = slices.Delete(g.ids, i, i+1)
		if decrement {
			g.desired--
		}
		delete(s.inst, id)
	}
}

// Cluster.

// Node is served from an informer cache in KubeCluster: no API call.
func (s *sim) Node(_ context.Context, id string) (*corev1.Node, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	in, ok := s.inst[id]
	if !ok || !s.booted(in) {
		return nil, nil
	}
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: id}, Spec: corev1.NodeSpec{ProviderID: "aws:///sim/" + id, Unschedulable: in.cordoned}}, nil
}

func (s *sim) Ready(_ context.Context, n *corev1.Node) (bool, string, error) {
	s.calls.Add(3)       // KubeCluster: the node's pods, DaemonSets of two namespaces
	return true, "", nil // booted nodes register Ready with their DaemonSets
}

func (s *sim) Taint(_ context.Context, n *corev1.Node, _ string) error {
	s.calls.Add(1)
	s.mu.Lock()
	defer s.mu.Unlock()
	if in, ok := s.inst[n.Name]; ok {
		in.tainted = true
	}
	return nil
}

// Drain evicts every pod of the node through the simulated Eviction API
// (evict), retrying refused evictions until the node is empty.
func (s *sim) Drain(ctx context.Context, n *corev1.Node, opts rollout.DrainOptions, blocked func(string)) error {
	s.calls.Add(1) // cordon
	s.mu.Lock()
	s.inst[n.Name].cordoned = true
	s.mu.Unlock()
	deadline := time.Now().Add(opts.Timeout)
	for {
		s.mu.Lock()
		left := 0
		for _, p := range s.onNode(n.Name) {
			s.calls.Add(1) // eviction request
			if !s.evict(p) {
				left++
			}
		}
		s.mu.Unlock()
		if left == 0 {
			return nil
		}
		if blocked != nil {
			blocked("sim")
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d pods left", left)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(s.boot / 50):
		}
	}
}

// onNode lists the pods on a node (mu held).
func (s *sim) onNode(node string) []*pod {
	var out []*pod
	for _, p := range s.pods {
		if p.node == node {
			out = append(out, p)
		}
	}
	return out
}

// evict is the simulated Eviction API (mu held): an eviction is refused
// while the pod's service has its budget of pods down (the PDB); an evicted
// pod is recreated, under a new name, on a booted, schedulable node and is
// Ready a twentieth of a boot later. It records the most pods of one
// service ever down at once, counted independently after the move.
func (s *sim) evict(p *pod) bool {
	now := time.Now()
	down := 0
	for _, q := range s.bySvc[p.svc] {
		if now.Before(q.ready) {
			down++
		}
	}
	if down+1 > max(1, s.replicas/10) {
		s.refused.Add(1)
		return false // 429: the PDB refuses
	}
	target := s.schedulable(p)
	if target == "" {
		return false
	}
	delete(s.byName, p.name)
	s.gen++
	p.name = fmt.Sprintf("svc%d-%d", p.svc, s.gen)
	s.byName[p.name] = p
	p.node, p.ready = target, now.Add(s.boot/20)
	nowDown := 0
	for _, q := range s.bySvc[p.svc] {
		if now.Before(q.ready) {
			nowDown++
		}
	}
	if d := int64(nowDown); d > s.maxDown.Load() {
		s.maxDown.Store(d)
	}
	return true
}

// schedulable picks a booted, uncordoned, untainted node (mu held).
func (s *sim) schedulable(*pod) string {
	var cands []string
	for id, in := range s.inst {
		if s.booted(in) && !in.cordoned && !in.tainted {
			cands = append(cands, id)
			if len(cands) > 32 {
				break
			}
		}
	}
	if len(cands) == 0 {
		return ""
	}
	return cands[rand.IntN(len(cands))]
}

type memStore struct {
	mu sync.Mutex
	st *rollout.State
}

func (m *memStore) Load(context.Context) (*rollout.State, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.st == nil {
		return nil, nil
	}
	c := *m.st
	return &c, nil
}

func (m *memStore) Save(_ context.Context, st *rollout.State) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	c := *st
	m.st = &c
	return nil
}
