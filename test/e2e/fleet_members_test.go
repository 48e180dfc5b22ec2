//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/trellis-dev/trellis/addons"
	bootdef "github.com/trellis-dev/trellis/bootstrap/definition"
	karmadaaddon "github.com/trellis-dev/trellis/fleet/karmada/addon"
)

// TestFleetAPIMembers runs the fleet's API with three members on the kind
// cluster, as AWS runs it: the karmada-apiserver addon rendered for 3
// replicas and applied by the real applier. What the test steps around:
// the definition's validation, which keeps kind at one member because its
// etcd data is an emptyDir, and that emptyDir, replaced in the rendered
// StatefulSet by the volume claim AWS's render has. The members must find
// each other through the peer Service's names in the cluster's DNS and
// pass each other's peer-certificate checks (etcd checks the name of the
// address a peer connects from: the cluster DNS's reverse answer for the
// pod), the install Job must write the fleet's API through the Service,
// and with one member's etcd SIGKILLed (its container restarts on the same
// volume) the others keep serving writes, which it has once back. Each
// member's data is a volume claim, as on AWS (kind has no provisioner:
// the test makes static volumes on the untainted node for the claims), so
// that a member whose pod is replaced (a new pod, a new address) comes
// back on its data, and its peers take it at its new address: the
// applier's roll of all three with one down (rollWithMemberDown).
func TestFleetAPIMembers(t *testing.T) {
	ctx := context.Background()
	clearEarlierFleet(t)
	// The fleet's images on the nodes, then the one-member fleet pruned
	// (its StatefulSet's Service name cannot change to the peers').
	run(t, nil, "local", "up", "-f", definition, "--kubeconfig", kubeconfig, "--fleet", "--fleet-kubeconfig", filepath.Join(t.TempDir(), "fleet.kubeconfig"))
	removeFleet(t)
	deleteEtcdVolumes(t)
	t.Cleanup(func() { deleteEtcdVolumes(t) })
	t.Cleanup(func() { removeFleet(t) })
	makeEtcdVolumes(t, 3)

	def, err := bootdef.Load(filepath.Join(root, definition))
	if err != nil {
		t.Fatal(err)
	}
	def.Addons = append(def.Addons, bootdef.Addon{Name: karmadaaddon.KarmadaAPIServerAddon, Values: map[string]any{bootdef.FleetReplicasValue: float64(3)}})
	rendered, err := addons.Render(def.ClusterDefinition, karmadaaddon.Lifecycle{})
	if err != nil {
		t.Fatal(err)
	}
	claimEtcdData(t, rendered)
	a, err := addons.NewApplier(cfg, os.Stdout)
	if err != nil {
		t.Fatal(err)
	}
	a.Lifecycles = []addons.Lifecycle{karmadaaddon.Lifecycle{}}
	a.Wait = 6 * time.Minute
	start := time.Now()
	if _, err := a.Apply(ctx, rendered); err != nil {
		t.Fatalf("three members: %v", err)
	}
	t.Logf("fleet API with 3 members applied and ready (install Job complete): %s", time.Since(start).Round(time.Second))
	pods, err := cs.CoreV1().Pods(addons.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=" + karmadaaddon.KarmadaService})
	if err != nil || len(pods.Items) != 3 {
		t.Fatalf("fleet API pods: %v, %d", err, len(pods.Items))
	}
	nodes := map[string]bool{}
	for _, p := range pods.Items {
		nodes[p.Spec.NodeName] = true
	}
	t.Logf("members on %d nodes", len(nodes))

	// Each member's apiserver, over its own etcd member: what one writes
	// the others read.
	secret, err := cs.CoreV1().Secrets(addons.Namespace).Get(ctx, karmadaaddon.KarmadaSecret, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	member := func(i int) kubernetes.Interface {
		port := portForward(t, addons.Namespace, fmt.Sprintf("%s-%d", karmadaaddon.KarmadaService, i), karmadaaddon.KarmadaPort)
		kc, err := clientcmd.Load(secret.Data[karmadaaddon.KarmadaLocalKubeconfig])
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range kc.Clusters {
			c.Server = fmt.Sprintf("https://127.0.0.1:%d", port)
		}
		c, err := clientcmd.NewDefaultClientConfig(*kc, nil).ClientConfig()
		if err != nil {
			t.Fatal(err)
		}
		return kubernetes.NewForConfigOrDie(c)
	}
	fleets := []kubernetes.Interface{member(0), member(1), member(2)}
	put := func(c kubernetes.Interface, name string) error {
		_, err := c.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
		return err
	}
	has := func(c kubernetes.Interface, name string) bool {
		_, err := c.CoreV1().ConfigMaps("default").Get(ctx, name, metav1.GetOptions{})
		return err == nil
	}
	if err := put(fleets[0], "written-at-0"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a write through member 0 read through members 1 and 2", 30*time.Second, func() (bool, string) {
		return has(fleets[1], "written-at-0") && has(fleets[2], "written-at-0"), "not yet"
	})

	// Member 1's etcd SIGKILLed (the process, from the host): members 0
	// and 2 take writes; member 1's container restarts on its volume and
	// has them.
	pid := etcdPID(t, fmt.Sprintf("%s-1", karmadaaddon.KarmadaService))
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	var first time.Duration
	var failed []string
	for k := range 10 {
		name := fmt.Sprintf("while-1-down-%d", k)
		eventually(t, "a write through member 0 with member 1's etcd killed", 30*time.Second, func() (bool, string) {
			err := put(fleets[0], name)
			if err != nil && !strings.Contains(err.Error(), "already exists") {
				failed = append(failed, fmt.Sprintf("%s: %v", time.Since(killed).Round(time.Millisecond), err))
				return false, err.Error()
			}
			if first == 0 {
				first = time.Since(killed)
			}
			return true, ""
		})
	}
	t.Logf("member 1's etcd killed: first write through member 0 after %s, 10 after %s; %d failed attempts %q",
		first.Round(time.Millisecond), time.Since(killed).Round(time.Millisecond), len(failed), failed)
	eventually(t, "member 1 Ready again after its etcd restarted", 3*time.Minute, func() (bool, string) {
		p, err := cs.CoreV1().Pods(addons.Namespace).Get(ctx, karmadaaddon.KarmadaService+"-1", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		var restarts int32
		for _, s := range p.Status.ContainerStatuses {
			if s.Name == "etcd" {
				restarts = s.RestartCount
			}
		}
		return restarts > 0 && podReady(p), fmt.Sprintf("etcd restarts %d, ready %v", restarts, podReady(p))
	})
	t.Logf("member 1 Ready %s after the kill", time.Since(killed).Round(time.Second))
	// Read from member 1's own etcd (serializable: its copy, not the
	// leader's), through a port-forward to the pod's loopback.
	ec := memberEtcd(t, 1)
	eventually(t, "member 1's own copy has the writes made while it was down", time.Minute, func() (bool, string) {
		c, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		resp, err := ec.Get(c, "/registry/configmaps/default/while-1-down-", clientv3.WithPrefix(), clientv3.WithCountOnly(), clientv3.WithSerializable())
		if err != nil {
			return false, err.Error()
		}
		return resp.Count == 10, fmt.Sprintf("%d of 10", resp.Count)
	})

	rollWithMemberDown(t, a, rendered, secret, member)
}

// etcdVolumeDir is where the static volumes of the fleet's etcd live on
// the untainted node (deleteEtcdVolumes removes it: hostPath volumes have
// no deleter).
const etcdVolumeDir = "/var/lib/trellis-e2e-fleet-etcd"

// fleetEtcdLabel marks the static volumes the fleet's etcd members bind.
const fleetEtcdLabel = "e2e.trellis.dev/fleet-etcd"

// makeEtcdVolumes makes n static volumes for the fleet etcd's claims (the
// cluster's default class binds static volumes; kind has no provisioner),
// on the node the members can run on: the one without a NoSchedule taint
// (kind's worker is a tainted instance group's node).
func makeEtcdVolumes(t *testing.T, n int) {
	t.Helper()
	ctx := context.Background()
	node := untaintedNode(t)
	sc, class := storageClasses(t), ""
	for _, c := range sc {
		if c.Annotations["storageclass.kubernetes.io/is-default-class"] == "true" {
			class = c.Name
		}
	}
	stamp := time.Now().UnixNano()
	for i := range n {
		pv := &corev1.PersistentVolume{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("e2e-fleet-etcd-%d", i), Labels: map[string]string{fleetEtcdLabel: "true"}},
			Spec: corev1.PersistentVolumeSpec{
				Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Gi")},
				AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
				StorageClassName:              class,
				PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{
					Path: fmt.Sprintf("%s/%d/%d", etcdVolumeDir, stamp, i), Type: new(corev1.HostPathDirectoryOrCreate)}},
				NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
					MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "kubernetes.io/hostname", Operator: corev1.NodeSelectorOpIn, Values: []string{node}}}}}}},
			},
		}
		if _, err := cs.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// untaintedNode is the name of the one node that takes pods without
// tolerations.
func untaintedNode(t *testing.T) string {
	t.Helper()
	nodes, err := cs.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, n := range nodes.Items {
		if !slices.ContainsFunc(n.Spec.Taints, func(taint corev1.Taint) bool { return taint.Effect != corev1.TaintEffectPreferNoSchedule }) {
			names = append(names, n.Name)
		}
	}
	if len(names) != 1 {
		t.Fatalf("nodes without taints: %v, want one (the fleet's members and their volumes go there)", names)
	}
	return names[0]
}

func storageClasses(t *testing.T) []storagev1.StorageClass {
	t.Helper()
	l, err := cs.StorageV1().StorageClasses().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return l.Items
}

// clearEarlierFleet removes what an earlier run of TestFleetAPIMembers
// left on the cluster when it was stopped before its cleanups ran (go
// test's -timeout panics without running them): the three-member plane and
// its etcd's volume claims. local up --fleet refuses, rightly, a
// one-member fleet over three members' data, so each fleet test would
// otherwise fail on the last run's state.
func clearEarlierFleet(t *testing.T) {
	t.Helper()
	claims, volumes, err := etcdVolumesLeft(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(claims) == 0 && volumes == 0 {
		return
	}
	t.Logf("an earlier run left the fleet etcd's claims %v and %d volumes: removing the fleet and them", claims, volumes)
	removeFleet(t)
	deleteEtcdVolumes(t)
}

// etcdVolumesLeft lists the fleet etcd's volume claims and counts the
// test's static volumes.
func etcdVolumesLeft(ctx context.Context) (claims []string, volumes int, err error) {
	l, err := cs.CoreV1().PersistentVolumeClaims(addons.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, 0, err
	}
	for _, c := range l.Items {
		if strings.HasPrefix(c.Name, "etcd-data-"+karmadaaddon.KarmadaService+"-") {
			claims = append(claims, c.Name)
		}
	}
	pvs, err := cs.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{LabelSelector: fleetEtcdLabel + "=true"})
	if err != nil {
		return nil, 0, err
	}
	return claims, len(pvs.Items), nil
}

// deleteEtcdVolumes deletes the fleet etcd's claims (a pruned addon
// leaves them) and the test's volumes, and waits until they are gone.
func deleteEtcdVolumes(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	for i := range 5 {
		_ = cs.CoreV1().PersistentVolumeClaims(addons.Namespace).Delete(ctx, fmt.Sprintf("etcd-data-%s-%d", karmadaaddon.KarmadaService, i), metav1.DeleteOptions{})
	}
	_ = cs.CoreV1().PersistentVolumes().DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: fleetEtcdLabel + "=true"})
	eventually(t, "the fleet etcd's claims and volumes gone", 2*time.Minute, func() (bool, string) {
		claims, volumes, err := etcdVolumesLeft(ctx)
		if err != nil {
			return false, err.Error()
		}
		n := len(claims) + volumes
		return n == 0, fmt.Sprintf("%d left", n)
	})
	if out, err := exec.Command("docker", "exec", untaintedNode(t), "rm", "-rf", etcdVolumeDir).CombinedOutput(); err != nil {
		t.Fatalf("removing the fleet etcd's volumes on the node: %v: %s", err, out)
	}
}

// claimEtcdData gives the rendered fleet API's etcd a volume claim per
// member, as the AWS render has, in place of kind's emptyDir.
func claimEtcdData(t *testing.T, rendered []addons.Rendered) {
	t.Helper()
	for _, r := range rendered {
		for _, o := range r.Objects {
			if o.GetKind() != "StatefulSet" || o.GetName() != karmadaaddon.KarmadaService {
				continue
			}
			vols, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "volumes")
			kept := slices.DeleteFunc(vols, func(v any) bool { return v.(map[string]any)["name"] == "etcd-data" })
			if len(kept) != len(vols)-1 {
				t.Fatalf("the rendered fleet API has no etcd-data volume to replace: %v", vols)
			}
			if err := unstructured.SetNestedSlice(o.Object, kept, "spec", "template", "spec", "volumes"); err != nil {
				t.Fatal(err)
			}
			claim := map[string]any{"metadata": map[string]any{"name": "etcd-data"}, "spec": map[string]any{
				"accessModes": []any{"ReadWriteOnce"}, "resources": map[string]any{"requests": map[string]any{"storage": "10Gi"}}}}
			if err := unstructured.SetNestedSlice(o.Object, []any{claim}, "spec", "volumeClaimTemplates"); err != nil {
				t.Fatal(err)
			}
			return
		}
	}
	t.Fatal("no fleet API StatefulSet rendered")
}

// etcdPID is the host PID of the fleet etcd member of pod (the kind
// nodes' processes are the host's).
func etcdPID(t *testing.T, pod string) int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := bytes.Split(bytes.TrimRight(b, "\x00"), []byte{0})
		if len(args) > 0 && string(args[0]) == "/usr/local/bin/etcd" && bytes.Contains(b, []byte("--name="+pod+"\x00")) && bytes.Contains(b, []byte("--initial-cluster-token=trellis-fleet")) {
			return pid
		}
	}
	t.Fatalf("no etcd process of pod %s on this host", pod)
	return 0
}

// memberEtcd is a client of fleet API member i's own etcd, through a
// port-forward to the pod's loopback (closed when the test ends).
func memberEtcd(t *testing.T, i int) *clientv3.Client {
	t.Helper()
	port := portForward(t, addons.Namespace, fmt.Sprintf("%s-%d", karmadaaddon.KarmadaService, i), 2379)
	ec, err := clientv3.New(clientv3.Config{Endpoints: []string{fmt.Sprintf("http://127.0.0.1:%d", port)}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ec.Close() })
	return ec
}
