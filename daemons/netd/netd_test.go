package netd

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/trellis-dev/trellis/api/wellknown"
	"github.com/trellis-dev/trellis/internal/testutil/cluster"
)

func sh(t testing.TB, args ...string) string {
	t.Helper()
	out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// inNS runs f on a thread inside the named network namespace; sockets
// made there stay there.
func inNS(t testing.TB, name string, f func()) {
	t.Helper()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	orig, err := netns.Get()
	if err != nil {
		t.Fatal(err)
	}
	defer orig.Close()
	target, err := netns.GetFromName(name)
	if err != nil {
		t.Fatal(err)
	}
	defer target.Close()
	if err := netns.Set(target); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := netns.Set(orig); err != nil {
			panic(err) // a thread left in the wrong namespace must not be reused
		}
	}()
	f()
}

// reach reports whether a TCP connection from namespace ns to addr
// succeeds (real packets across the veth).
func reach(t *testing.T, ns, addr string) bool {
	var ok bool
	inNS(t, ns, func() {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			ok = true
			c.Close()
		}
	})
	return ok
}

// TestIntegrationRoutesInNetworkNamespaces: two "nodes" are network
// namespaces joined by a veth pair; node-2 holds a pod address. netd on
// node-1, fed by the real apiserver's Node objects, routes node-2's pod
// CIDR so a TCP connection crosses; it follows nodes coming and going, and leaves
// routes it does not own alone.
func TestIntegrationRoutesInNetworkNamespaces(t *testing.T) {
	sfx := fmt.Sprint(os.Getpid() % 100000)
	n1, n2 := "trellis-n1-"+sfx, "trellis-n2-"+sfx
	for _, n := range []string{n1, n2} {
		sh(t, "ip", "netns", "add", n)
		t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", n).Run() })
	}
	v1, v2 := "tv1"+sfx, "tv2"+sfx
	sh(t, "ip", "link", "add", v1, "type", "veth", "peer", "name", v2)
	sh(t, "ip", "link", "set", v1, "netns", n1)
	sh(t, "ip", "link", "set", v2, "netns", n2)
	sh(t, "ip", "-n", n1, "addr", "add", "10.240.0.1/24", "dev", v1)
	sh(t, "ip", "-n", n2, "addr", "add", "10.240.0.2/24", "dev", v2)
	for _, x := range [][2]string{{n1, v1}, {n2, v2}} {
		sh(t, "ip", "-n", x[0], "link", "set", x[1], "up")
		sh(t, "ip", "-n", x[0], "link", "set", "lo", "up")
	}
	sh(t, "ip", "-n", n2, "addr", "add", "10.244.2.7/32", "dev", "lo") // a pod on node-2
	// The pod serves on node-2.
	var l net.Listener
	inNS(t, n2, func() {
		var err error
		if l, err = net.Listen("tcp", "10.244.2.7:7777"); err != nil {
			t.Fatal(err)
		}
	})
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	// A route netd does not own.
	sh(t, "ip", "-n", n1, "route", "add", "10.99.0.0/16", "via", "10.240.0.2", "proto", "static")
	if reach(t, n1, "10.244.2.7:7777") {
		t.Fatal("the pod answers before netd routes it: the test proves nothing")
	}

	cp := cluster.Start(t, cluster.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	node := func(name, cidr, ip string) {
		n, err := cp.Client.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.NodeSpec{PodCIDR: cidr, PodCIDRs: []string{cidr}}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: ip}}
		if _, err := cp.Client.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	node("node-1", "10.244.1.0/24", "10.240.0.1")
	node("node-2", "10.244.2.0/24", "10.240.0.2")

	nsh, err := netns.GetFromName(n1)
	if err != nil {
		t.Fatal(err)
	}
	defer nsh.Close()
	h, err := netlink.NewHandleAt(nsh)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	cni := t.TempDir()
	d, err := New(Config{NodeName: "node-1", Client: cp.Client, CNIConfDir: cni, Netlink: h, Resync: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = d.Run(ctx) }()

	routes := func() string { return sh(t, "ip", "-n", n1, "route", "show") }
	eventually := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(15 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s; routes of node-1:\n%s", what, routes())
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	eventually("a route to node-2's pods", func() bool { return strings.Contains(routes(), "10.244.2.0/24 via 10.240.0.2") })
	if !reach(t, n1, "10.244.2.7:7777") {
		t.Fatalf("node-1 cannot reach the pod on node-2:\n%s", routes())
	}

	// The node's own CNI configuration.
	b, err := os.ReadFile(filepath.Join(cni, "10-trellis.conflist"))
	if err != nil {
		t.Fatal(err)
	}
	var conf struct {
		Plugins []struct {
			Type string
			IPAM struct {
				Ranges [][]struct{ Subnet string }
			}
		}
	}
	if err := json.Unmarshal(b, &conf); err != nil || conf.Plugins[0].Type != "bridge" || conf.Plugins[0].IPAM.Ranges[0][0].Subnet != "10.244.1.0/24" {
		t.Fatalf("CNI config %s (%v)", b, err)
	}

	// Nodes come and go.
	node("node-3", "10.244.3.0/24", "10.240.0.3")
	eventually("a route to node-3's pods", func() bool { return strings.Contains(routes(), "10.244.3.0/24 via 10.240.0.3") })
	if err := cp.Client.CoreV1().Nodes().Delete(ctx, "node-2", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually("node-2's route gone", func() bool { return !strings.Contains(routes(), "10.244.2.0/24") })
	if reach(t, n1, "10.244.2.7:7777") {
		t.Error("the deleted node's pods are still routed")
	}
	// A route removed behind netd's back comes back at the next resync.
	sh(t, "ip", "-n", n1, "route", "del", "10.244.3.0/24")
	eventually("node-3's route restored", func() bool { return strings.Contains(routes(), "10.244.3.0/24 via 10.240.0.3") })
	if !strings.Contains(routes(), "10.99.0.0/16 via 10.240.0.2") {
		t.Errorf("netd removed a route it does not own:\n%s", routes())
	}
}

// serveTCP serves TCP on addr inside namespace ns, handing every
// connection and its source address to handle, which closes nothing.
func serveTCP(t testing.TB, ns, addr string, handle func(c net.Conn, source string)) {
	t.Helper()
	var l net.Listener
	inNS(t, ns, func() {
		var err error
		if l, err = net.Listen("tcp", addr); err != nil {
			t.Fatal(err)
		}
	})
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			host, _, _ := net.SplitHostPort(c.RemoteAddr().String())
			handle(c, host)
			c.Close()
		}
	}()
}

// listen serves TCP on addr inside namespace ns and records the source
// address of every connection.
func listen(t *testing.T, ns, addr string, seen chan<- string) {
	t.Helper()
	serveTCP(t, ns, addr, func(_ net.Conn, host string) {
		select {
		case seen <- host:
		default:
		}
	})
}

// source dials addr from ns and returns the source address the server saw
// ("" when the connection failed).
func source(t *testing.T, ns, addr string, seen <-chan string) string {
	t.Helper()
	for len(seen) > 0 {
		<-seen
	}
	if !reach(t, ns, addr) {
		return ""
	}
	select {
	case s := <-seen:
		return s
	case <-time.After(2 * time.Second):
		return "?"
	}
}

// TestIntegrationPodTrafficMasqueradeAndMetadata: a pod namespace behind
// node-1 reaches a pod on node-2 with its own address, reaches the outside
// masqueraded as node-1, and cannot reach the metadata address until its
// pod is annotated to allow it.
func TestIntegrationPodTrafficMasqueradeAndMetadata(t *testing.T) {
	sfx := fmt.Sprint(os.Getpid() % 100000)
	n1, n2, p1 := "trellis-m1-"+sfx, "trellis-m2-"+sfx, "trellis-p1-"+sfx
	for _, n := range []string{n1, n2, p1} {
		sh(t, "ip", "netns", "add", n)
		t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", n).Run() })
	}
	a, b, ph, pe := "ma"+sfx, "mb"+sfx, "mh"+sfx, "me"+sfx
	sh(t, "ip", "link", "add", a, "type", "veth", "peer", "name", b)
	sh(t, "ip", "link", "set", a, "netns", n1)
	sh(t, "ip", "link", "set", b, "netns", n2)
	sh(t, "ip", "link", "add", ph, "type", "veth", "peer", "name", pe)
	sh(t, "ip", "link", "set", ph, "netns", n1)
	sh(t, "ip", "link", "set", pe, "netns", p1)
	for _, c := range [][]string{
		{"-n", n1, "addr", "add", "10.240.0.1/24", "dev", a}, {"-n", n2, "addr", "add", "10.240.0.2/24", "dev", b},
		{"-n", n1, "addr", "add", "10.244.1.1/24", "dev", ph}, {"-n", p1, "addr", "add", "10.244.1.5/24", "dev", pe},
		{"-n", n1, "link", "set", a, "up"}, {"-n", n2, "link", "set", b, "up"}, {"-n", n1, "link", "set", ph, "up"}, {"-n", p1, "link", "set", pe, "up"},
		{"-n", n1, "link", "set", "lo", "up"}, {"-n", n2, "link", "set", "lo", "up"}, {"-n", p1, "link", "set", "lo", "up"},
		{"-n", p1, "route", "add", "default", "via", "10.244.1.1"},
		{"-n", n1, "route", "add", "default", "via", "10.240.0.2"},
		{"-n", n2, "addr", "add", "10.244.2.7/32", "dev", "lo"},    // a pod on node-2
		{"-n", n2, "addr", "add", MetadataIP + "/32", "dev", "lo"}, // the metadata service
		{"-n", n2, "addr", "add", "192.0.2.10/32", "dev", "lo"},    // outside the cluster
		{"-n", n2, "route", "add", "10.244.1.0/24", "via", "10.240.0.1"},
	} {
		sh(t, append([]string{"ip"}, c...)...)
	}
	sh(t, "ip", "netns", "exec", n1, "sysctl", "-qw", "net.ipv4.ip_forward=1")
	seen := make(chan string, 16)
	listen(t, n2, "10.244.2.7:7777", seen)
	listen(t, n2, MetadataIP+":80", seen)
	listen(t, n2, "192.0.2.10:7777", seen)

	// Controls, before netd: metadata reachable, no masquerading.
	if got := source(t, p1, MetadataIP+":80", seen); got != "10.244.1.5" {
		t.Fatalf("before netd the pod reaches metadata as %q; the topology is wrong", got)
	}
	if got := source(t, p1, "192.0.2.10:7777", seen); got != "10.244.1.5" {
		t.Fatalf("before netd the outside sees %q, want the pod's own address", got)
	}

	cp := cluster.Start(t, cluster.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, n := range [][3]string{{"node-1", "10.244.1.0/24", "10.240.0.1"}, {"node-2", "10.244.2.0/24", "10.240.0.2"}} {
		nd, err := cp.Client.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n[0]}, Spec: corev1.NodeSpec{PodCIDR: n[1]}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		nd.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: n[2]}}
		if _, err := cp.Client.CoreV1().Nodes().UpdateStatus(ctx, nd, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	pod, err := cp.Client.CoreV1().Pods("default").Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: corev1.PodSpec{NodeName: "node-1", Containers: []corev1.Container{{Name: "c", Image: "c"}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod.Status.PodIP, pod.Status.Phase = "10.244.1.5", corev1.PodRunning
	if pod, err = cp.Client.CoreV1().Pods("default").UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	nsh, err := netns.GetFromName(n1)
	if err != nil {
		t.Fatal(err)
	}
	defer nsh.Close()
	h, err := netlink.NewHandleAt(nsh)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	d, err := New(Config{NodeName: "node-1", Client: cp.Client, CNIConfDir: t.TempDir(), Netlink: h, Resync: time.Second,
		ClusterCIDR: "10.244.0.0/16", Firewall: true, Exec: []string{"ip", "netns", "exec", n1}})
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = d.Run(ctx) }()
	deadline := time.Now().Add(15 * time.Second)
	for d.Applied() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("netd never reconciled")
		}
		time.Sleep(100 * time.Millisecond)
	}

	if got := source(t, p1, "10.244.2.7:7777", seen); got != "10.244.1.5" {
		t.Errorf("pod to pod across nodes: the server saw %q, want the pod's own 10.244.1.5", got)
	}
	if got := source(t, p1, "192.0.2.10:7777", seen); got != "10.240.0.1" {
		t.Errorf("pod to outside: the server saw %q, want node-1's 10.240.0.1 (masqueraded)", got)
	}
	if got := source(t, p1, MetadataIP+":80", seen); got != "" {
		t.Errorf("the pod reached the metadata address (as %q)", got)
	}
	pod.Annotations = map[string]string{wellknown.AnnotationMetadataAccess: "allow"}
	if _, err := cp.Client.CoreV1().Pods("default").Update(ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(15 * time.Second)
	for source(t, p1, MetadataIP+":80", seen) == "" {
		if time.Now().After(deadline) {
			t.Fatalf("an allowed pod still cannot reach the metadata address:\n%s", sh(t, "ip", "netns", "exec", n1, "iptables-save"))
		}
		time.Sleep(200 * time.Millisecond)
	}
}
