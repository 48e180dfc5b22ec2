package vpc_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/trellis-dev/trellis/daemons/netd/vpc"
	"github.com/trellis-dev/trellis/internal/awsemu"
	"github.com/trellis-dev/trellis/internal/netdapi"
)

// A t3.medium takes 3 ENIs of 6 addresses: 15 pods. The pool warms up on
// the primary ENI, attaches the others as pods fill it, refuses the 16th
// pod, and gives everything back down to its warm target.
func TestIntegrationPoolGrowsWithinLimitsAndShrinks(t *testing.T) {
	e := newEnv(t, "t3.medium")
	ctx := context.Background()
	p := e.open(e.config())
	if l := p.Limits(); l.ENIs != 3 || l.AddressesPerENI != 6 || l.MaxPods() != 17 {
		t.Fatalf("limits %+v (maxPods %d), want 3 ENIs x 6 addresses, maxPods 17", l, l.MaxPods())
	}
	if err := p.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if s := p.Stats(); s.ENIs != 1 || s.Free != 5 || s.Used != 0 {
		t.Fatalf("after the first sync: %+v, want 1 ENI with 5 free addresses", s)
	}
	e.agree(p)
	seen := map[string]bool{}
	for i := range 15 {
		a, err := p.Assign(ctx, vpc.Key{Container: fmt.Sprintf("c%d", i), Iface: "eth0", Pod: fmt.Sprintf("ns/pod-%d", i)})
		if err != nil {
			t.Fatalf("pod %d: %v", i, err)
		}
		if seen[a.IP.String()] {
			t.Fatalf("pod %d got %s twice", i, a.IP)
		}
		seen[a.IP.String()] = true
		if !p.SubnetCIDR().Contains(a.IP) {
			t.Fatalf("pod %d got %s, outside the node's subnet %s", i, a.IP, p.SubnetCIDR())
		}
	}
	if s := p.Stats(); s.ENIs != 3 || s.Used != 15 || s.Free != 0 {
		t.Fatalf("with 15 pods: %+v, want 3 ENIs, 15 used", s)
	}
	e.agree(p)
	if _, err := p.Assign(ctx, vpc.Key{Container: "c15", Iface: "eth0", Pod: "ns/pod-15"}); !errors.Is(err, vpc.ErrExhausted) {
		t.Fatalf("16th pod: %v, want ErrExhausted", err)
	}
	// A retried CNI ADD gets the same address.
	a1, _ := p.Assign(ctx, vpc.Key{Container: "c3", Iface: "eth0", Pod: "ns/pod-3"})
	if as := p.Assignments(); !containsIP(as, a1.IP.String(), "ns/pod-3") {
		t.Fatalf("retried ADD of pod-3 got %s", a1.IP)
	}
	for i := range 15 {
		if _, err := p.Release(fmt.Sprintf("c%d", i), "eth0"); err != nil {
			t.Fatal(err)
		}
	}
	if r, err := p.Release("c0", "eth0"); r != nil || err != nil {
		t.Fatalf("a repeated DEL: %v, %v", r, err)
	}
	if err := p.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if s := p.Stats(); s.ENIs != 1 || s.Free != 5 {
		t.Fatalf("after releasing every pod: %+v, want back to 1 ENI with 5 free", s)
	}
	e.agree(p)
}

func containsIP(as []vpc.Assignment, ip, pod string) bool {
	for _, a := range as {
		if a.IP.String() == ip && a.Pod == pod {
			return true
		}
	}
	return false
}

// A restarted pool knows its pods from the checkpoint and EC2: it asks EC2
// for nothing new and gives no address twice.
func TestIntegrationPoolRestartKeepsAssignments(t *testing.T) {
	e := newEnv(t, "m5.large")
	ctx := context.Background()
	p := e.open(e.config())
	want := map[string]string{}
	for i := range 12 {
		a, err := p.Assign(ctx, vpc.Key{Container: fmt.Sprintf("c%d", i), Iface: "eth0", Pod: fmt.Sprintf("ns/pod-%d", i)})
		if err != nil {
			t.Fatal(err)
		}
		want[a.Container] = a.IP.String()
	}
	if err := p.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	e.proxy.ResetCalls()
	q := e.open(e.config())
	if err := q.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if n := mutating(e.proxy.Calls()); n != 0 {
		t.Errorf("the restarted pool changed EC2 %d times: %v", n, e.proxy.Calls())
	}
	got := q.Assignments()
	if len(got) != len(want) {
		t.Fatalf("restarted with %d assignments, want %d", len(got), len(want))
	}
	for _, a := range got {
		if want[a.Container] != a.IP.String() {
			t.Errorf("container %s: %s after the restart, %s before", a.Container, a.IP, want[a.Container])
		}
	}
	n, err := q.Assign(ctx, vpc.Key{Container: "new", Iface: "eth0", Pod: "ns/new"})
	if err != nil {
		t.Fatal(err)
	}
	for c, ip := range want {
		if ip == n.IP.String() {
			t.Fatalf("the new pod got %s, which %s holds", ip, c)
		}
	}
	e.agree(q)
}

// Throttled calls are retried after a backoff, counted, and given up on
// with an error naming the call.
func TestIntegrationPoolThrottled(t *testing.T) {
	e := newEnv(t, "m5.large")
	ctx := context.Background()
	p := e.open(e.config())
	reg := prometheus.NewRegistry()
	if err := p.Register(reg); err != nil {
		t.Fatal(err)
	}
	e.proxy.Throttle("AssignPrivateIpAddresses", 3)
	start := time.Now()
	if _, err := p.Assign(ctx, vpc.Key{Container: "c", Iface: "eth0", Pod: "ns/p"}); err != nil {
		t.Fatalf("assign through 3 throttles: %v", err)
	}
	// Backoff 20ms doubling, each wait at least half: >= 10+20+40 ms.
	if took := time.Since(start); took < 70*time.Millisecond {
		t.Errorf("3 throttled calls retried within %s: no backoff", took)
	}
	if n := e.proxy.Calls()["AssignPrivateIpAddresses"]; n != 4 {
		t.Errorf("AssignPrivateIpAddresses called %d times, want 3 throttled + 1", n)
	}
	if v := counter(t, reg, "trellis_netd_ec2_throttled_total", "AssignPrivateIpAddresses"); v != 3 {
		t.Errorf("throttled metric %v, want 3", v)
	}
	e.proxy.Throttle("CreateNetworkInterface", -1)
	for i := range 8 { // fill the primary ENI (9 secondary addresses, one is c's)
		if _, err := p.Assign(ctx, vpc.Key{Container: fmt.Sprintf("f%d", i), Iface: "eth0", Pod: "ns/f"}); err != nil {
			t.Fatal(err)
		}
	}
	_, err := p.Assign(ctx, vpc.Key{Container: "over", Iface: "eth0", Pod: "ns/over"})
	if err == nil || !strings.Contains(err.Error(), "CreateNetworkInterface") || !strings.Contains(err.Error(), awsemu.ThrottleCode) {
		t.Fatalf("assign while every CreateNetworkInterface is throttled: %v", err)
	}
	if n := e.proxy.Calls()["CreateNetworkInterface"]; n != 8 {
		t.Errorf("CreateNetworkInterface tried %d times, want the discipline's 8 attempts", n)
	}
	e.proxy.Clear()
	if _, err := p.Assign(ctx, vpc.Key{Container: "over", Iface: "eth0", Pod: "ns/over"}); err != nil {
		t.Fatalf("after the throttling ends: %v", err)
	}
	e.agree(p)
}

// counter reads name{action} from reg.
func counter(t *testing.T, reg *prometheus.Registry, name, action string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "action" && l.GetValue() == action {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	t.Fatalf("no %s{action=%q}", name, action)
	return 0
}

// A change EC2 made but never answered (the caller gave up) is learnt on
// the next sync: the pool reads the ENIs back instead of trusting its view.
func TestIntegrationPoolInterruptedCall(t *testing.T) {
	e := newEnv(t, "m5.large")
	p := e.open(e.config())
	held := e.proxy.Hold("AssignPrivateIpAddresses")
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-held; cancel() }()
	if _, err := p.Assign(ctx, vpc.Key{Container: "c", Iface: "eth0", Pod: "ns/p"}); !errors.Is(err, context.Canceled) {
		t.Fatalf("assign whose EC2 call never answered: %v", err)
	}
	if got := len(e.cloud().addresses()); got != 9 {
		t.Fatalf("EC2 holds %d addresses, want the 9 the unanswered call assigned", got)
	}
	e.proxy.ResetCalls()
	if err := p.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := e.proxy.Calls()["AssignPrivateIpAddresses"]; n != 0 {
		t.Errorf("the sync asked EC2 for %d more batches instead of reading back the 9 it had", n)
	}
	e.agree(p)
}

// An ENI another tool attached to the instance is not the pool's: its
// addresses are never handed to pods, and it is never detached.
func TestIntegrationPoolLeavesOthersENIs(t *testing.T) {
	e := newEnv(t, "m5.large")
	ctx := context.Background()
	other, err := e.direct.CreateNetworkInterface(ctx, &ec2.CreateNetworkInterfaceInput{SubnetId: aws.String(e.subnet), SecondaryPrivateIpAddressCount: aws.Int32(3)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.direct.AttachNetworkInterface(ctx, &ec2.AttachNetworkInterfaceInput{NetworkInterfaceId: other.NetworkInterface.NetworkInterfaceId,
		InstanceId: aws.String(e.instance), DeviceIndex: aws.Int32(1)}); err != nil {
		t.Fatal(err)
	}
	p := e.open(e.config())
	for _, en := range p.ENIs() {
		if en.ID == aws.ToString(other.NetworkInterface.NetworkInterfaceId) {
			t.Fatal("the pool took another tool's ENI")
		}
	}
	for i := range 12 { // past the primary ENI: the pool attaches its own at device 2
		a, err := p.Assign(ctx, vpc.Key{Container: fmt.Sprint("c", i), Iface: "eth0", Pod: "ns/p"})
		if err != nil {
			t.Fatal(err)
		}
		if a.ENI == aws.ToString(other.NetworkInterface.NetworkInterfaceId) || a.Device == 1 {
			t.Fatalf("pod %d got %s on the other tool's ENI", i, a.IP)
		}
	}
	if got := len(e.cloud().attached); got != 3 {
		t.Fatalf("%d ENIs attached, want the primary, the other tool's and the pool's second", got)
	}
	// The other tool's ENI counts against m5.large's 3: 2 x 9 pods.
	for i := 12; i < 18; i++ {
		if _, err := p.Assign(ctx, vpc.Key{Container: fmt.Sprint("c", i), Iface: "eth0", Pod: "ns/p"}); err != nil {
			t.Fatalf("pod %d: %v", i, err)
		}
	}
	if _, err := p.Assign(ctx, vpc.Key{Container: "c18", Iface: "eth0", Pod: "ns/p"}); !errors.Is(err, vpc.ErrExhausted) {
		t.Fatalf("19th pod: %v, want ErrExhausted", err)
	}
	if s := p.Stats(); s.Capacity != 18 {
		t.Errorf("capacity %d, want 18", s.Capacity)
	}
}

// The plugin's socket: an ADD without the pod's name is refused (the
// collector could not know its pod), a DEL of nothing answers an empty
// address.
func TestIntegrationPoolSocket(t *testing.T) {
	e := newEnv(t, "m5.large")
	p := e.open(e.config())
	srv := httptest.NewServer(p.Handler(9001))
	defer srv.Close()
	post := func(path, body string) (int, string) {
		resp, err := http.Post(srv.URL+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := post(netdapi.AddPath, `{"container":"c1","iface":"eth0"}`); code != http.StatusBadRequest || !strings.Contains(body, "K8S_POD_NAME") {
		t.Fatalf("ADD without a pod: %d %s", code, body)
	}
	code, body := post(netdapi.AddPath, `{"container":"c1","iface":"eth0","namespace":"shop","pod":"web-0"}`)
	if code != http.StatusOK || !strings.Contains(body, `"mtu":9001`) {
		t.Fatalf("ADD: %d %s", code, body)
	}
	if code, body := post(netdapi.DelPath, `{"container":"c1","iface":"eth0"}`); code != http.StatusOK || strings.Contains(body, `"ip":""`) {
		t.Fatalf("DEL: %d %s", code, body)
	}
	if code, body := post(netdapi.DelPath, `{"container":"c1","iface":"eth0"}`); code != http.StatusOK || !strings.Contains(body, `"ip":""`) {
		t.Fatalf("a repeated DEL: %d %s", code, body)
	}
	if code, _ := post(netdapi.AddPath, `{"iface":"eth0"}`); code != http.StatusBadRequest {
		t.Fatalf("ADD without a container: %d", code)
	}
}

// An ENI change whose caller gave up after EC2 did it (a create never
// answered, a detach not followed by its delete) leaves an ENI of the node
// unattached in EC2: the next sync deletes it, and no ENI leaks.
func TestIntegrationPoolInterruptedENIChange(t *testing.T) {
	e := newEnv(t, "t3.medium")
	p := e.open(e.config())
	bg := context.Background()
	interrupted := func(action string) {
		t.Helper()
		held := e.proxy.Hold(action)
		ctx, cancel := context.WithCancel(bg)
		defer cancel()
		go func() { <-held; cancel() }()
		if err := p.Sync(ctx); !errors.Is(err, context.Canceled) {
			t.Fatalf("sync whose %s never answered: %v", action, err)
		}
		if got := e.cloud().available; len(got) != 1 {
			t.Fatalf("after the interrupted %s EC2 has unattached ENIs %v, want the one it left", action, got)
		}
		if err := p.Sync(bg); err != nil {
			t.Fatal(err)
		}
		e.agree(p)
	}
	assign := func(from, to int) {
		t.Helper()
		for i := from; i < to; i++ {
			if _, err := p.Assign(bg, vpc.Key{Container: fmt.Sprintf("c%d", i), Iface: "eth0", Pod: fmt.Sprintf("ns/pod-%d", i)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := p.Sync(bg); err != nil {
		t.Fatal(err)
	}
	assign(0, 5) // the primary ENI is full: the next sync creates one
	interrupted("CreateNetworkInterface")
	if s := p.Stats(); s.ENIs != 2 || s.Free != 5 {
		t.Fatalf("after the retried create: %+v, want 2 ENIs with 5 free", s)
	}
	assign(5, 10)
	if err := p.Sync(bg); err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		if _, err := p.Release(fmt.Sprintf("c%d", i), "eth0"); err != nil {
			t.Fatal(err)
		}
	}
	// 15 free: the sync gives back two ENIs, and the first one's detach
	// is cut off. The next sync deletes it; the 10 left free are within
	// the margin (warm 5 plus 5), so the other ENI stays.
	interrupted("DetachNetworkInterface")
	if s := p.Stats(); s.ENIs != 2 || s.Free != 10 {
		t.Fatalf("after the retried shrink: %+v, want 2 ENIs with 10 free", s)
	}
}

// detachingEC2 answers, for one ENI, an attachment EC2 is still
// detaching, as AWS does for a while after a DetachNetworkInterface (the
// emulator detaches at once).
type detachingEC2 struct {
	vpc.EC2
	eni string
}

func (d *detachingEC2) DescribeNetworkInterfaces(ctx context.Context, in *ec2.DescribeNetworkInterfacesInput, opts ...func(*ec2.Options)) (*ec2.DescribeNetworkInterfacesOutput, error) {
	out, err := d.EC2.DescribeNetworkInterfaces(ctx, in, opts...)
	if err != nil {
		return nil, err
	}
	for i := range out.NetworkInterfaces {
		if ni := &out.NetworkInterfaces[i]; aws.ToString(ni.NetworkInterfaceId) == d.eni && ni.Attachment != nil {
			ni.Attachment.Status = ec2types.AttachmentStatusDetaching
		}
	}
	return out, nil
}

// A netd that starts while one of its ENIs is still detaching (the shrink
// that detached it was cut off) gives no pod an address on it, keeps its
// device index, and deletes it once EC2 has finished the detach.
func TestIntegrationPoolENIStillDetaching(t *testing.T) {
	e := newEnv(t, "t3.medium")
	bg := context.Background()
	p := e.open(e.config())
	if err := p.Sync(bg); err != nil {
		t.Fatal(err)
	}
	for i := range 5 { // the primary ENI is full: the next sync adds one
		if _, err := p.Assign(bg, vpc.Key{Container: fmt.Sprintf("c%d", i), Iface: "eth0", Pod: fmt.Sprintf("ns/pod-%d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Sync(bg); err != nil {
		t.Fatal(err)
	}
	var second vpc.ENI
	for _, en := range p.ENIs() {
		if en.Device == 1 {
			second = en
		}
	}
	if second.ID == "" {
		t.Fatalf("no second ENI after the sync: %+v", p.ENIs())
	}
	cfg := e.config()
	cfg.EC2 = &detachingEC2{EC2: e.ec2, eni: second.ID}
	p = e.open(cfg)
	for _, en := range p.ENIs() {
		if en.ID == second.ID {
			t.Fatalf("the restarted pool took ENI %s, which is detaching", second.ID)
		}
	}
	// The sync grows the pool past the detaching ENI: a new one, at
	// another device index, and the pods' addresses on it.
	if err := p.Sync(bg); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		a, err := p.Assign(bg, vpc.Key{Container: fmt.Sprintf("d%d", i), Iface: "eth0", Pod: fmt.Sprintf("ns/new-%d", i)})
		if err != nil {
			t.Fatal(err)
		}
		if a.ENI == second.ID || slices.Contains(second.Addresses, a.IP) {
			t.Fatalf("pod %d got %s on ENI %s, which is detaching", i, a.IP, a.ENI)
		}
	}
	for _, en := range p.ENIs() {
		if en.ID == second.ID || en.Device == 1 {
			t.Errorf("the pool holds ENI %s at device %d while %s, detaching, holds device 1", en.ID, en.Device, second.ID)
		}
	}
	// EC2 finishes the detach: the next sync deletes the ENI.
	if _, err := e.direct.DetachNetworkInterface(bg, &ec2.DetachNetworkInterfaceInput{AttachmentId: aws.String(second.Attachment)}); err != nil {
		t.Fatal(err)
	}
	if err := p.Sync(bg); err != nil {
		t.Fatal(err)
	}
	if got := e.cloud().available; len(got) != 0 {
		t.Errorf("after the detach finished, EC2 still has the node's unattached ENIs %v", got)
	}
}
