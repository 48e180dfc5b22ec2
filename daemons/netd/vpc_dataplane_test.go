package netd

import (
	"context"
	"fmt"
	"io"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/trellis-dev/trellis/api/wellknown"
)

// TestIntegrationVPCDataplane: netd's AWS mode on two instances in
// different subnets of an emulated VPC. Pods get VPC addresses from their
// instance's ENIs (the seventh pod of a t3.medium lands on a second ENI);
// pod-to-pod TCP across subnets keeps the pod's address, through the
// source/destination check; pod-to-outside takes the node's address;
// metadata is blocked unless the pod is annotated. Then the bridge mode,
// on the same VPC, cannot connect the two instances' pods at all.
func TestIntegrationVPCDataplane(t *testing.T) {
	dp := startVPCDataplane(t)
	l, bin, cp, sockets, pools := dp.lab, dp.bin, dp.cp, dp.sockets, dp.pools
	a, b := l.insts[0], l.insts[1]
	ctx := context.Background()

	// Pods: seven on A (a t3.medium's first ENI holds five), one on B.
	podIP := map[string]string{}
	addPod := func(in *labInstance, pod string) {
		t.Helper()
		ns := "trl-" + pod + "-" + l.sfx
		sh(t, "ip", "netns", "add", ns)
		t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", ns).Run() })
		out, err := cni(t, bin, in.ns, "ADD", sockets[in.name], pod, "/var/run/netns/"+ns)
		if err != nil {
			t.Fatalf("CNI ADD %s: %v\n%s", pod, err, out)
		}
		for _, a := range pools[in.name].Assignments() {
			if a.Pod == "shop/"+pod {
				podIP[pod] = a.IP.String()
			}
		}
		if !strings.Contains(out, podIP[pod]+"/32") {
			t.Fatalf("CNI ADD %s printed %s, want its address %s", pod, out, podIP[pod])
		}
	}
	for i := range 7 {
		addPod(a, fmt.Sprint("a", i))
	}
	addPod(b, "b0")
	onSecondary := ""
	for _, as := range pools[a.name].Assignments() {
		if as.Device > 0 {
			onSecondary = strings.TrimPrefix(as.Pod, "shop/")
		}
		if !a.subnet.Contains(as.IP) {
			t.Fatalf("pod %s got %s, outside its instance's subnet %s", as.Pod, as.IP, a.subnet)
		}
	}
	if onSecondary == "" {
		t.Fatalf("no pod of A on a secondary ENI: %+v", pools[a.name].Assignments())
	}
	l.plug() // the router learns the newest addresses

	// Pod to pod across subnets, from the primary ENI and from the
	// secondary one: the server sees the pod's own address.
	echoSource(t, "trl-b0-"+l.sfx, net.JoinHostPort(podIP["b0"], fmt.Sprint(labService)))
	for _, pod := range []string{"a0", onSecondary} {
		if got := sourceSeen(t, "trl-"+pod+"-"+l.sfx, net.JoinHostPort(podIP["b0"], fmt.Sprint(labService))); got != podIP[pod] {
			t.Errorf("pod %s (%s) to pod b0 across subnets: the server saw %q, want the pod's own address", pod, podIP[pod], got)
		}
	}
	// And back: B's pod reaches the pod on A's secondary ENI.
	echoSource(t, "trl-"+onSecondary+"-"+l.sfx, net.JoinHostPort(podIP[onSecondary], fmt.Sprint(labService)))
	if got := sourceSeen(t, "trl-b0-"+l.sfx, net.JoinHostPort(podIP[onSecondary], fmt.Sprint(labService))); got != podIP["b0"] {
		t.Errorf("pod b0 to pod %s on a secondary ENI: the server saw %q", onSecondary, got)
	}
	// Leaving the VPC: the node's primary address.
	echoSource(t, l.out, net.JoinHostPort(outsideIP, fmt.Sprint(labService)))
	if got := sourceSeen(t, "trl-"+onSecondary+"-"+l.sfx, net.JoinHostPort(outsideIP, fmt.Sprint(labService))); got != a.primary.String() {
		t.Errorf("pod %s to the outside: the server saw %q, want the node's primary %s", onSecondary, got, a.primary)
	}
	// Metadata: blocked, until the pod is annotated.
	echoSource(t, l.router, net.JoinHostPort(MetadataIP, "80"))
	if got := sourceSeen(t, "trl-a1-"+l.sfx, net.JoinHostPort(MetadataIP, "80")); got != "" {
		t.Errorf("pod a1 reached the metadata address (as %s) without the annotation", got)
	}
	if got := sourceSeen(t, a.ns, net.JoinHostPort(MetadataIP, "80")); got == "" {
		t.Error("the node itself cannot reach the metadata address: the block is too wide")
	}
	pod, err := cp.Client.CoreV1().Pods("default").Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "a1",
		Annotations: map[string]string{wellknown.AnnotationMetadataAccess: "allow"}},
		Spec: corev1.PodSpec{NodeName: a.name, Containers: []corev1.Container{{Name: "c", Image: "x"}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod.Status.PodIP, pod.Status.PodIPs = podIP["a1"], []corev1.PodIP{{IP: podIP["a1"]}}
	if _, err := cp.Client.CoreV1().Pods("default").UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for sourceSeen(t, "trl-a1-"+l.sfx, net.JoinHostPort(MetadataIP, "80")) == "" {
		if time.Now().After(deadline) {
			t.Fatal("the annotated pod never reached the metadata address")
		}
		time.Sleep(200 * time.Millisecond)
	}

	// Reconciled many times by now: each rule once.
	rules := sh(t, "ip", "-n", a.ns, "rule", "show")
	if n := strings.Count(rules, "fwmark 0x80/0x80 lookup main"); n != 1 {
		t.Errorf("%d outbound-mark rules, want 1:\n%s", n, rules)
	}
	if n := strings.Count(rules, "from "+podIP[onSecondary]+" lookup"); n != 1 {
		t.Errorf("%d rules from the pod on the secondary ENI, want 1:\n%s", n, rules)
	}

	// CNI DEL gives the address back and unwires the pod.
	before := pools[a.name].Stats()
	if out, err := cni(t, bin, a.ns, "DEL", sockets[a.name], "a2", "/var/run/netns/trl-a2-"+l.sfx); err != nil {
		t.Fatalf("CNI DEL: %v\n%s", err, out)
	}
	if after := pools[a.name].Stats(); after.Used != before.Used-1 {
		t.Errorf("DEL: %d addresses used, want %d", after.Used, before.Used-1)
	}
	if out := sh(t, "ip", "-n", a.ns, "route", "show"); strings.Contains(out, podIP["a2"]+" ") {
		t.Errorf("the deleted pod is still routed:\n%s", out)
	}
	if _, err := cni(t, bin, a.ns, "DEL", sockets[a.name], "a2", "/var/run/netns/trl-a2-"+l.sfx); err != nil {
		t.Error("a repeated DEL failed")
	}

	// Churn through the real plugin: ADD to a wired pod, then DEL, 50
	// times; the pool ends where it started and the host keeps no veth,
	// route or rule of the churned pods. (How long an ADD takes is
	// BenchmarkCNIAdd's, in make bench: a test asserts no wall-clock time.)
	start := pools[a.name].Stats()
	rulesBefore := sh(t, "ip", "-n", a.ns, "rule", "show")
	ns := "trl-churn-" + l.sfx
	sh(t, "ip", "netns", "add", ns)
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", ns).Run() })
	for i := range 50 {
		pod := fmt.Sprint("churn", i)
		if out, err := cni(t, bin, a.ns, "ADD", sockets[a.name], pod, "/var/run/netns/"+ns); err != nil {
			t.Fatalf("churn ADD %d: %v\n%s", i, err, out)
		}
		if out, err := cni(t, bin, a.ns, "DEL", sockets[a.name], pod, "/var/run/netns/"+ns); err != nil {
			t.Fatalf("churn DEL %d: %v\n%s", i, err, out)
		}
	}
	// On B, whose pool keeps nothing: emptied before each pod, so each
	// ADD gets its address from EC2 while the plugin waits.
	for i := range 3 {
		pod := fmt.Sprint("cold", i)
		if err := pools[b.name].Sync(ctx); err != nil {
			t.Fatal(err)
		}
		if s := pools[b.name].Stats(); s.Free != 0 {
			t.Fatalf("B's pool holds %d free addresses before a cold ADD", s.Free)
		}
		if out, err := cni(t, bin, b.ns, "ADD", sockets[b.name], pod, "/var/run/netns/"+ns); err != nil {
			t.Fatalf("cold ADD %d: %v\n%s", i, err, out)
		}
		if out, err := cni(t, bin, b.ns, "DEL", sockets[b.name], pod, "/var/run/netns/"+ns); err != nil {
			t.Fatalf("cold DEL %d: %v\n%s", i, err, out)
		}
	}
	if end := pools[a.name].Stats(); end.Used != start.Used {
		t.Errorf("after the churn %d addresses used, before it %d", end.Used, start.Used)
	}
	if out := sh(t, "ip", "-n", a.ns, "-o", "link", "show"); strings.Count(out, ": trl") != start.Used {
		t.Errorf("%d pod interfaces on the host, want %d:\n%s", strings.Count(out, ": trl"), start.Used, out)
	}
	if rules := sh(t, "ip", "-n", a.ns, "rule", "show"); rules != rulesBefore {
		t.Errorf("rules changed by the churn:\n%s\nbefore:\n%s", rules, rulesBefore)
	}

	// The bridge mode on the same VPC: pod CIDRs routed via the other
	// node's address, which is not on-link from another subnet.
	t.Run("bridge mode", func(t *testing.T) {
		sh(t, "ip", "-n", b.ns, "addr", "add", "10.244.2.7/32", "dev", "lo")
		// One listener on B, on its bridge-mode pod address and its VPC
		// address alike. The control: it answers A over the VPC's own
		// addresses, before and after the bridge-mode attempt, so that the
		// attempt's silence is the mode's, not a dead listener's.
		echoSource(t, b.ns, ":7777")
		bridgeControl := func(when string) {
			t.Helper()
			if got := sourceSeen(t, a.ns, net.JoinHostPort(b.primary.String(), "7777")); got != a.primary.String() {
				t.Fatalf("control %s: B's listener, over the VPC from A's %s, saw %q: the bridge-mode check below would prove nothing", when, a.primary, got)
			}
		}
		bridgeControl("before")
		for _, in := range l.insts {
			n, err := cp.Client.CoreV1().Nodes().Get(ctx, in.name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			n.Spec.PodCIDR = map[string]string{"node-a": "10.244.1.0/24", "node-b": "10.244.2.0/24"}[in.name]
			if n, err = cp.Client.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: in.primary.String()}}
			if _, err := cp.Client.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		nsh, err := netns.GetFromName(a.ns)
		if err != nil {
			t.Fatal(err)
		}
		defer nsh.Close()
		h, err := netlink.NewHandleAt(nsh)
		if err != nil {
			t.Fatal(err)
		}
		defer h.Close()
		d, err := New(Config{NodeName: a.name, Client: cp.Client, CNIConfDir: t.TempDir(), Netlink: h, Resync: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		bctx, bcancel := context.WithCancel(ctx)
		defer bcancel()
		go func() { _ = d.Run(bctx) }()
		time.Sleep(3 * time.Second)
		rerr := d.Reconcile()
		if rerr == nil || !strings.Contains(rerr.Error(), "10.244.2.0/24") {
			t.Errorf("bridge mode routed B's pod CIDR via B's address in another subnet: %v", rerr)
		}
		t.Logf("bridge mode's route: %v", rerr)
		// Even forced on-link, the VPC drops what is not VPC-addressed.
		sh(t, "ip", "-n", a.ns, "route", "replace", "10.244.2.0/24", "via", b.primary.String(), "dev", "eth0", "onlink")
		sh(t, "ip", "-n", a.ns, "addr", "add", "10.244.1.5/32", "dev", "lo")
		var seen string
		inNS(t, a.ns, func() {
			dl := net.Dialer{Timeout: 2 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP("10.244.1.5")}}
			if c, err := dl.Dial("tcp", "10.244.2.7:7777"); err == nil {
				b, _ := io.ReadAll(c)
				seen = string(b)
				c.Close()
			}
		})
		if seen != "" {
			t.Errorf("a bridge-mode pod address crossed the VPC (seen as %q): the router does not play the VPC", seen)
		}
		bridgeControl("after")
	})
}
