//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/trellis-dev/trellis/addons"
	bootdef "github.com/trellis-dev/trellis/bootstrap/definition"
)

// TestFleetAPIMembers runs the fleet's API with three members on the kind
// cluster, as AWS runs it: the karmada-apiserver addon rendered for 3
// replicas and applied by the real applier (the definition's validation,
// which keeps kind at one member because its etcd data is an emptyDir, is
// what the test steps around: it replaces no pod). The members must find
// each other through the peer Service's names in the cluster's DNS and
// pass each other's peer-certificate checks (etcd checks the name of the
// address a peer connects from: the cluster DNS's reverse answer for the
// pod), the install Job must write the fleet's API through the Service,
// and with one member's etcd SIGKILLed (its container restarts on the same
// volume) the others keep serving writes, which it has once back.
func TestFleetAPIMembers(t *testing.T) {
	ctx := context.Background()
	// The fleet's images on the nodes, then the one-member fleet pruned
	// (its StatefulSet's Service name cannot change to the peers').
	run(t, nil, "local", "up", "-f", definition, "--kubeconfig", kubeconfig, "--fleet", "--fleet-kubeconfig", filepath.Join(t.TempDir(), "fleet.kubeconfig"))
	removeFleet(t)
	t.Cleanup(func() { removeFleet(t) })

	def, err := bootdef.Load(filepath.Join(root, definition))
	if err != nil {
		t.Fatal(err)
	}
	def.Addons = append(def.Addons, bootdef.Addon{Name: addons.KarmadaAPIServerAddon, Values: map[string]any{bootdef.FleetReplicasValue: float64(3)}})
	rendered, err := addons.Render(def.ClusterDefinition)
	if err != nil {
		t.Fatal(err)
	}
	a, err := addons.NewApplier(cfg, os.Stdout)
	if err != nil {
		t.Fatal(err)
	}
	a.Wait = 6 * time.Minute
	start := time.Now()
	if _, err := a.Apply(ctx, rendered); err != nil {
		t.Fatalf("three members: %v", err)
	}
	t.Logf("fleet API with 3 members applied and ready (install Job complete): %s", time.Since(start).Round(time.Second))
	pods, err := cs.CoreV1().Pods(addons.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=" + addons.KarmadaService})
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
	secret, err := cs.CoreV1().Secrets(addons.Namespace).Get(ctx, addons.KarmadaSecret, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	member := func(i int) kubernetes.Interface {
		port := portForward(t, addons.Namespace, fmt.Sprintf("%s-%d", addons.KarmadaService, i), addons.KarmadaPort)
		kc, err := clientcmd.Load(secret.Data[addons.KarmadaLocalKubeconfig])
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
	pid := etcdPID(t, fmt.Sprintf("%s-1", addons.KarmadaService))
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
		p, err := cs.CoreV1().Pods(addons.Namespace).Get(ctx, addons.KarmadaService+"-1", metav1.GetOptions{})
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
	etcdPort := portForward(t, addons.Namespace, addons.KarmadaService+"-1", 2379)
	ec, err := clientv3.New(clientv3.Config{Endpoints: []string{fmt.Sprintf("http://127.0.0.1:%d", etcdPort)}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ec.Close() }()
	eventually(t, "member 1's own copy has the writes made while it was down", time.Minute, func() (bool, string) {
		c, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		resp, err := ec.Get(c, "/registry/configmaps/default/while-1-down-", clientv3.WithPrefix(), clientv3.WithCountOnly(), clientv3.WithSerializable())
		if err != nil {
			return false, err.Error()
		}
		return resp.Count == 10, fmt.Sprintf("%d of 10", resp.Count)
	})
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
