package netd

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/trellis-dev/trellis/daemons/netd/vpc"
	"github.com/trellis-dev/trellis/internal/awsemu"
	"github.com/trellis-dev/trellis/internal/awsemu/awsemutest"
	"github.com/trellis-dev/trellis/internal/testutil/cluster"
)

// vpcLab is a VPC built from network namespaces, its EC2 side in the AWS
// API emulator: a router namespace plays the VPC (it delivers an address
// to the ENI that owns it, as the VPC's mapping service does, drops what
// is not VPC-addressed, and drops a packet an ENI sends from an address
// it does not own, as the source/destination check does; only instances'
// primary addresses may leave for the outside). Each instance is a
// namespace whose interfaces are its ENIs, plugged with the MACs EC2
// gave them as the emulator attaches them.
type vpcLab struct {
	t      testing.TB
	sfx    string
	ec2    *ec2.Client
	router string
	out    string
	insts  []*labInstance
	vpcID  string

	mu      sync.Mutex
	plugged map[string]string // ENI id -> router-side link
	paused  bool              // the hypervisor rests (latency runs)
}

type labInstance struct {
	name, id, ns string
	subnet       netip.Prefix
	primary      netip.Addr
}

const (
	labVPC     = "10.20.0.0/16"
	outsideIP  = "198.51.100.10"
	outsideGW  = "198.51.100.1"
	labService = 7000
)

func newVPCLab(t testing.TB) *vpcLab {
	t.Helper()
	emu := awsemutest.Start(t)
	cfg := aws.Config{Region: "us-east-1", BaseEndpoint: aws.String(emu.URL),
		Credentials: credentials.NewStaticCredentialsProvider("trellis-emulator", "trellis-emulator", "")}
	sfx := fmt.Sprint(os.Getpid() % 100000)
	l := &vpcLab{t: t, sfx: sfx, ec2: vpc.NewClient(cfg), router: "trl-vpc-" + sfx, out: "trl-out-" + sfx, plugged: map[string]string{}}
	ctx := context.Background()
	v, err := l.ec2.CreateVpc(ctx, &ec2.CreateVpcInput{CidrBlock: aws.String(labVPC)})
	if err != nil {
		t.Fatal(err)
	}
	l.vpcID = aws.ToString(v.Vpc.VpcId)
	img, err := awsemu.NewClients(emu.URL, "us-east-1").Image(ctx, "trellis-node", "x86_64")
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{l.router, l.out} {
		sh(t, "ip", "netns", "add", n)
		t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", n).Run() })
	}
	sh(t, "ip", "netns", "exec", l.router, "sysctl", "-qw", "net.ipv4.ip_forward=1")
	sh(t, "ip", "-n", l.router, "link", "set", "lo", "up")
	// Addresses of the VPC that no ENI owns go nowhere.
	sh(t, "ip", "-n", l.router, "route", "add", "blackhole", labVPC)
	// The instance-metadata address is the router's own.
	sh(t, "ip", "-n", l.router, "addr", "add", MetadataIP+"/32", "dev", "lo")
	// The outside: one host beyond the VPC's edge.
	ro, oo := "ro"+sfx, "oo"+sfx
	sh(t, "ip", "link", "add", ro, "type", "veth", "peer", "name", oo)
	sh(t, "ip", "link", "set", ro, "netns", l.router)
	sh(t, "ip", "link", "set", oo, "netns", l.out)
	sh(t, "ip", "-n", l.router, "addr", "add", outsideGW+"/24", "dev", ro)
	sh(t, "ip", "-n", l.out, "addr", "add", outsideIP+"/24", "dev", oo)
	for _, x := range [][2]string{{l.router, ro}, {l.out, oo}, {l.out, "lo"}} {
		sh(t, "ip", "-n", x[0], "link", "set", x[1], "up")
	}
	sh(t, "ip", "-n", l.out, "route", "add", "default", "via", outsideGW)
	for i, zone := range []string{"a", "b"} {
		cidr := fmt.Sprintf("10.20.%d.0/24", i+1)
		sub, err := l.ec2.CreateSubnet(ctx, &ec2.CreateSubnetInput{VpcId: v.Vpc.VpcId, CidrBlock: aws.String(cidr), AvailabilityZone: aws.String("us-east-1" + zone)})
		if err != nil {
			t.Fatal(err)
		}
		run, err := l.ec2.RunInstances(ctx, &ec2.RunInstancesInput{ImageId: aws.String(img), InstanceType: ec2types.InstanceTypeT3Medium,
			MinCount: aws.Int32(1), MaxCount: aws.Int32(1), SubnetId: sub.Subnet.SubnetId})
		if err != nil {
			t.Fatal(err)
		}
		in := &labInstance{name: "node-" + zone, id: aws.ToString(run.Instances[0].InstanceId), ns: "trl-" + zone + "-" + sfx,
			subnet: netip.MustParsePrefix(cidr), primary: netip.MustParseAddr(aws.ToString(run.Instances[0].PrivateIpAddress))}
		sh(t, "ip", "netns", "add", in.ns)
		t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", in.ns).Run() })
		sh(t, "ip", "netns", "exec", in.ns, "sysctl", "-qw", "net.ipv4.ip_forward=1")
		sh(t, "ip", "-n", in.ns, "link", "set", "lo", "up")
		l.insts = append(l.insts, in)
	}
	l.plug()
	for _, in := range l.insts {
		sh(t, "ip", "-n", in.ns, "addr", "add", fmt.Sprintf("%s/%d", in.primary, in.subnet.Bits()), "dev", "eth0")
		sh(t, "ip", "-n", in.ns, "route", "add", "default", "via", in.subnet.Addr().Next().String())
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	// Stopped before the namespaces go (cleanups run last-in first).
	t.Cleanup(func() { cancel(); <-done })
	go func() { // the hypervisor: attached ENIs show up on their instance
		defer close(done)
		for ctx.Err() == nil {
			l.mu.Lock()
			paused := l.paused
			l.mu.Unlock()
			if !paused {
				l.plug()
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
	return l
}

// plug gives every attached ENI its interface in its instance and its link
// on the router, and makes the router's view of the addresses EC2's.
func (l *vpcLab) plug() {
	l.mu.Lock()
	defer l.mu.Unlock()
	ctx := context.Background()
	var accept []string
	for _, in := range l.insts {
		out, err := l.ec2.DescribeNetworkInterfaces(ctx, &ec2.DescribeNetworkInterfacesInput{
			Filters: []ec2types.Filter{{Name: aws.String("attachment.instance-id"), Values: []string{in.id}}}})
		if err != nil {
			l.t.Error(err)
			return
		}
		for _, ni := range out.NetworkInterfaces {
			id, dev := aws.ToString(ni.NetworkInterfaceId), aws.ToInt32(ni.Attachment.DeviceIndex)
			r, ok := l.plugged[id]
			if !ok {
				r = fmt.Sprintf("r%s%d%s", in.name[len(in.name)-1:], dev, l.sfx)
				e := fmt.Sprintf("e%s%d%s", in.name[len(in.name)-1:], dev, l.sfx)
				if err := run("ip", "link", "add", e, "address", aws.ToString(ni.MacAddress), "type", "veth", "peer", "name", r); err != nil {
					l.t.Error(err)
					return
				}
				for _, c := range [][]string{
					{"ip", "link", "set", r, "netns", l.router},
					{"ip", "link", "set", e, "netns", in.ns},
					{"ip", "-n", in.ns, "link", "set", e, "name", fmt.Sprintf("eth%d", dev)},
					{"ip", "-n", l.router, "addr", "add", in.subnet.Addr().Next().String() + "/32", "dev", r},
					{"ip", "netns", "exec", l.router, "sysctl", "-qw", "net.ipv4.conf." + r + ".proxy_arp=1"},
					{"ip", "-n", l.router, "link", "set", r, "up"},
					{"ip", "-n", in.ns, "link", "set", fmt.Sprintf("eth%d", dev), "up"},
				} {
					if err := run(c...); err != nil {
						l.t.Error(err)
						return
					}
				}
				l.plugged[id] = r
			}
			for _, a := range ni.PrivateIpAddresses {
				ip := aws.ToString(a.PrivateIpAddress)
				_ = run("ip", "-n", l.router, "route", "replace", ip+"/32", "dev", r)
				_ = run("ip", "-n", l.router, "neigh", "replace", ip, "lladdr", aws.ToString(ni.MacAddress), "dev", r, "nud", "permanent")
				accept = append(accept, fmt.Sprintf("-A TRL-SRCCHECK -i %s -s %s/32 -j RETURN", r, ip))
			}
		}
	}
	// The source/destination check, and the edge: only primaries leave.
	rules := "*raw\n:TRL-SRCCHECK - [0:0]\n" + strings.Join(accept, "\n") + "\n-A TRL-SRCCHECK -i ro" + l.sfx + " -j RETURN\n-A TRL-SRCCHECK -j DROP\nCOMMIT\n" +
		"*filter\n:TRL-EDGE - [0:0]\n"
	for _, in := range l.insts {
		rules += fmt.Sprintf("-A TRL-EDGE -o ro%s -s %s/32 -j RETURN\n", l.sfx, in.primary)
	}
	rules += fmt.Sprintf("-A TRL-EDGE -o ro%s -j DROP\nCOMMIT\n", l.sfx)
	cmd := exec.Command("ip", "netns", "exec", l.router, "iptables-restore", "-w", "--noflush")
	cmd.Stdin = strings.NewReader(rules)
	if out, err := cmd.CombinedOutput(); err != nil {
		l.t.Errorf("router rules: %v: %s", err, out)
		return
	}
	for _, j := range [][]string{{"raw", "PREROUTING", "TRL-SRCCHECK"}, {"filter", "FORWARD", "TRL-EDGE"}} {
		if run("ip", "netns", "exec", l.router, "iptables", "-w", "-t", j[0], "-C", j[1], "-j", j[2]) != nil {
			_ = run("ip", "netns", "exec", l.router, "iptables", "-w", "-t", j[0], "-I", j[1], "1", "-j", j[2])
		}
	}
}

func run(args ...string) error {
	out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %w: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

// echoSource serves on addr in namespace ns, answering each connection with
// the source address it came from.
func echoSource(t testing.TB, ns, addr string) {
	t.Helper()
	serveTCP(t, ns, addr, func(c net.Conn, host string) { _, _ = io.WriteString(c, host) })
}

// sourceSeen connects from namespace ns to addr and returns the source
// address the server saw ("" when nothing answered).
func sourceSeen(t testing.TB, ns, addr string) string {
	var seen string
	inNS(t, ns, func() {
		c, err := net.DialTimeout("tcp", addr, 2*time.Second)
		if err != nil {
			return
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(2 * time.Second))
		b, _ := io.ReadAll(c)
		seen = string(b)
	})
	return seen
}

// cni runs the trellis-cni binary in instance namespace ns, as a runtime
// does.
func cni(t testing.TB, bin, ns, command, socket, pod, netnsPath string) (string, error) {
	t.Helper()
	cmd := exec.Command("ip", "netns", "exec", ns, bin)
	cmd.Env = append(os.Environ(), "CNI_COMMAND="+command, "CNI_CONTAINERID=ctr-"+pod, "CNI_NETNS="+netnsPath, "CNI_IFNAME=eth0",
		"CNI_PATH="+filepath.Dir(bin), "CNI_ARGS=K8S_POD_NAMESPACE=shop;K8S_POD_NAME="+pod)
	cmd.Stdin = strings.NewReader(fmt.Sprintf(`{"cniVersion":"1.0.0","name":"trellis","type":"trellis-cni","socket":%q}`, socket))
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// vpcDataplane is netd's AWS mode running on the lab's two instances:
// node-a keeps a warm pool of two addresses, node-b none (its pods wait on
// EC2), and the trellis-cni binary a runtime would run.
type vpcDataplane struct {
	lab     *vpcLab
	bin     string
	cp      *cluster.ControlPlane
	sockets map[string]string    // node -> netd's CNI socket
	pools   map[string]*vpc.Pool // node -> netd's address pool
}

func startVPCDataplane(t testing.TB) *vpcDataplane {
	t.Helper()
	l := newVPCLab(t)
	bin := filepath.Join(t.TempDir(), "trellis-cni")
	if out, err := exec.Command("go", "build", "-o", bin, "../../cmd/trellis-cni").CombinedOutput(); err != nil {
		t.Fatalf("building trellis-cni: %v\n%s", err, out)
	}
	cp := cluster.Start(t, cluster.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel) // netd stops before the namespaces go
	sockDir, err := os.MkdirTemp("/dev/shm", "trellis-netd-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(sockDir) })
	// netd on each instance, in its namespace.
	sockets := map[string]string{}
	pools := map[string]*vpc.Pool{}
	for _, in := range l.insts {
		if _, err := cp.Client.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: in.name},
			Spec: corev1.NodeSpec{ProviderID: "aws:///us-east-1" + in.name[len(in.name)-1:] + "/" + in.id}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		nsh, err := netns.GetFromName(in.ns)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { nsh.Close() })
		h, err := netlink.NewHandleAt(nsh)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(h.Close)
		exe := []string{"ip", "netns", "exec", in.ns}
		// The node's instance comes from its providerID, as in a cluster.
		// A keeps a warm pool; B keeps none, so its pods wait on EC2.
		warm := map[string]int{"node-a": 2, "node-b": -1}[in.name]
		v, err := OpenVPC(ctx, VPCOptions{Client: cp.Client, NodeName: in.name, StateDir: filepath.Join(sockDir, in.name), EC2: l.ec2,
			Netlink: h, Exec: exe, Pool: vpc.Config{WarmAddresses: warm, Cooldown: -1, Discipline: vpc.Discipline{Rate: 1000, Burst: 1000}}})
		if err != nil {
			t.Fatal(err)
		}
		v.Collect, v.Sync = time.Hour, time.Second
		sockets[in.name], pools[in.name] = v.Socket, v.Pool
		d, err := New(Config{NodeName: in.name, Client: cp.Client, CNIConfDir: t.TempDir(), Netlink: h, Resync: time.Second,
			Firewall: true, Exec: exe, VPC: v})
		if err != nil {
			t.Fatal(err)
		}
		go func() { _ = d.Run(ctx) }()
	}
	waitSocket := func(p string) {
		deadline := time.Now().Add(30 * time.Second)
		for {
			if _, err := os.Stat(p); err == nil {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("netd never opened %s", p)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	for _, in := range l.insts {
		waitSocket(sockets[in.name])
	}
	return &vpcDataplane{lab: l, bin: bin, cp: cp, sockets: sockets, pools: pools}

}
