package vpc_test

import (
	"context"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/trellis-dev/trellis/daemons/netd/vpc"
	"github.com/trellis-dev/trellis/internal/awsemu"
	"github.com/trellis-dev/trellis/internal/awsemu/awsemutest"
)

const region = "us-east-1"

// env is one instance in a VPC of the AWS API emulator, reached through a
// fault proxy that counts, throttles and holds calls.
type env struct {
	t        testing.TB
	emu      *awsemu.Server
	proxy    *awsemu.FaultProxy
	ec2      *ec2.Client // through the proxy, SDK retries off
	direct   *ec2.Client // straight to the emulator (the test's own view)
	instance string
	subnet   string
	state    string
}

func newEnv(t testing.TB, instanceType string) *env {
	t.Helper()
	emu := awsemutest.Start(t)
	proxy := awsemutest.Proxy(t, emu)
	// The checkpoint lives on tmpfs, as netd's does (/run/trellis-netd):
	// it outlives netd, not the node's pods.
	dir, err := os.MkdirTemp("/dev/shm", "trellis-netd-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	e := &env{t: t, emu: emu, proxy: proxy, ec2: vpc.NewClient(awsConfig(proxy.URL)), direct: vpc.NewClient(awsConfig(emu.URL)),
		state: filepath.Join(dir, "addresses.json")}
	ctx := context.Background()
	vpcOut, err := e.direct.CreateVpc(ctx, &ec2.CreateVpcInput{CidrBlock: aws.String("10.20.0.0/16")})
	if err != nil {
		t.Fatal(err)
	}
	sub, err := e.direct.CreateSubnet(ctx, &ec2.CreateSubnetInput{VpcId: vpcOut.Vpc.VpcId, CidrBlock: aws.String("10.20.1.0/24"), AvailabilityZone: aws.String(region + "a")})
	if err != nil {
		t.Fatal(err)
	}
	e.subnet = aws.ToString(sub.Subnet.SubnetId)
	img, err := awsemu.NewClients(emu.URL, region).Image(ctx, "trellis-node", "x86_64")
	if err != nil {
		t.Fatal(err)
	}
	run, err := e.direct.RunInstances(ctx, &ec2.RunInstancesInput{ImageId: aws.String(img), InstanceType: ec2types.InstanceType(instanceType),
		MinCount: aws.Int32(1), MaxCount: aws.Int32(1), SubnetId: sub.Subnet.SubnetId})
	if err != nil {
		t.Fatal(err)
	}
	e.instance = aws.ToString(run.Instances[0].InstanceId)
	return e
}

func awsConfig(url string) aws.Config {
	return aws.Config{Region: region, BaseEndpoint: aws.String(url),
		Credentials: credentials.NewStaticCredentialsProvider("trellis-emulator", "trellis-emulator", "")}
}

func (e *env) config() vpc.Config {
	// No cooldown: the churn reuses a released address at once, the
	// hardest case for "never given twice".
	return vpc.Config{EC2: e.ec2, InstanceID: e.instance, Cluster: "test.k8s.local", StateFile: e.state, Cooldown: -1,
		Discipline: vpc.Discipline{Backoff: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond, Rate: 1000, Burst: 1000}}
}

func (e *env) open(cfg vpc.Config) *vpc.Pool {
	e.t.Helper()
	p, err := vpc.Open(context.Background(), cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	return p
}

// cloud is EC2's own view of the instance: attached ENIs with their
// secondary addresses, and the ENIs tagged as the node's that are not
// attached.
type cloud struct {
	attached  map[string][]netip.Addr
	available []string
}

func (c cloud) addresses() []netip.Addr {
	var all []netip.Addr
	for _, a := range c.attached {
		all = append(all, a...)
	}
	sort.Slice(all, func(i, j int) bool { return all[i].Less(all[j]) })
	return all
}

func (e *env) cloud() cloud {
	e.t.Helper()
	ctx := context.Background()
	c := cloud{attached: map[string][]netip.Addr{}}
	out, err := e.direct.DescribeNetworkInterfaces(ctx, &ec2.DescribeNetworkInterfacesInput{
		Filters: []ec2types.Filter{{Name: aws.String("attachment.instance-id"), Values: []string{e.instance}}}})
	if err != nil {
		e.t.Fatal(err)
	}
	for _, ni := range out.NetworkInterfaces {
		id := aws.ToString(ni.NetworkInterfaceId)
		c.attached[id] = nil
		for _, a := range ni.PrivateIpAddresses {
			if !aws.ToBool(a.Primary) {
				c.attached[id] = append(c.attached[id], netip.MustParseAddr(aws.ToString(a.PrivateIpAddress)))
			}
		}
	}
	out, err = e.direct.DescribeNetworkInterfaces(ctx, &ec2.DescribeNetworkInterfacesInput{Filters: []ec2types.Filter{
		{Name: aws.String("tag:" + vpc.TagInstance), Values: []string{e.instance}},
		{Name: aws.String("status"), Values: []string{"available"}}}})
	if err != nil {
		e.t.Fatal(err)
	}
	for _, ni := range out.NetworkInterfaces {
		c.available = append(c.available, aws.ToString(ni.NetworkInterfaceId))
	}
	return c
}

// agree checks that the pool and EC2 hold the same addresses, none
// assigned to two pods, and no unattached ENI of the node is left.
func (e *env) agree(p *vpc.Pool) {
	e.t.Helper()
	c := e.cloud()
	if len(c.available) != 0 {
		e.t.Errorf("unattached ENIs of the node left in EC2: %v", c.available)
	}
	var mine []netip.Addr
	for _, en := range p.ENIs() {
		mine = append(mine, en.Addresses...)
		if got := c.attached[en.ID]; len(got) != len(en.Addresses) {
			e.t.Errorf("ENI %s: EC2 has %d secondary addresses, the pool %d", en.ID, len(got), len(en.Addresses))
		}
	}
	if len(c.attached) != len(p.ENIs()) {
		e.t.Errorf("EC2 has %d ENIs attached, the pool knows %d", len(c.attached), len(p.ENIs()))
	}
	sort.Slice(mine, func(i, j int) bool { return mine[i].Less(mine[j]) })
	if got := c.addresses(); len(got) != len(mine) {
		e.t.Errorf("EC2 has %d addresses on the node, the pool %d", len(got), len(mine))
	}
	seen := map[netip.Addr]string{}
	for _, a := range p.Assignments() {
		if prev, ok := seen[a.IP]; ok {
			e.t.Errorf("address %s given to %s and %s", a.IP, prev, a.Pod)
		}
		seen[a.IP] = a.Pod
	}
	s := p.Stats()
	if s.Free+s.Used != len(mine) {
		e.t.Errorf("stats %+v do not add up to the %d addresses", s, len(mine))
	}
}

// mutating counts the calls that change EC2, from the proxy's counts.
func mutating(calls map[string]int) int {
	n := 0
	for _, a := range []string{"AssignPrivateIpAddresses", "UnassignPrivateIpAddresses", "CreateNetworkInterface", "AttachNetworkInterface",
		"ModifyNetworkInterfaceAttribute", "DetachNetworkInterface", "DeleteNetworkInterface"} {
		n += calls[a]
	}
	return n
}
