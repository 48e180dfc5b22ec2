package vpc

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

// Tags on the ENIs the pool creates: which instance made them (leaked
// ones, never attached, are found by it) and when.
const (
	TagInstance  = "trellis.dev/netd-instance"
	TagCluster   = "trellis.dev/cluster"
	TagCreatedAt = "trellis.dev/created-at"
)

// ENI is an interface attached to the node.
type ENI struct {
	ID         string
	Attachment string
	Device     int
	MAC        string
	Subnet     string
	Primary    netip.Addr
	// CIDR is the ENI's subnet (the node's: the pool makes its ENIs
	// there); set on the copies the pool hands out.
	CIDR      netip.Prefix
	Addresses []netip.Addr // secondary addresses
	draining  bool         // being detached: no new pod on it
	unwired   bool         // not ready on the node yet: no new pod on it
	releasing map[netip.Addr]bool
}

// host is what EC2 says about the instance.
type host struct {
	instanceType string
	subnet       string
	subnetCIDR   netip.Prefix
	groups       []string
	primary      netip.Addr
	vpcCIDRs     []netip.Prefix
}

func (p *Pool) describeHost(ctx context.Context) (host, error) {
	out, err := call(ctx, p.ec2, "DescribeInstances", func(ctx context.Context) (*ec2.DescribeInstancesOutput, error) {
		return p.cfg.EC2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{p.cfg.InstanceID}})
	})
	if err != nil {
		return host{}, err
	}
	if len(out.Reservations) != 1 || len(out.Reservations[0].Instances) != 1 {
		return host{}, fmt.Errorf("instance %s: EC2 does not know it", p.cfg.InstanceID)
	}
	in := out.Reservations[0].Instances[0]
	h := host{instanceType: string(in.InstanceType), subnet: aws.ToString(in.SubnetId)}
	if h.primary, err = netip.ParseAddr(aws.ToString(in.PrivateIpAddress)); err != nil {
		return host{}, fmt.Errorf("instance %s: %w", p.cfg.InstanceID, err)
	}
	for _, ni := range in.NetworkInterfaces {
		if ni.Attachment != nil && aws.ToInt32(ni.Attachment.DeviceIndex) == 0 {
			for _, g := range ni.Groups {
				h.groups = append(h.groups, aws.ToString(g.GroupId))
			}
		}
	}
	subs, err := call(ctx, p.ec2, "DescribeSubnets", func(ctx context.Context) (*ec2.DescribeSubnetsOutput, error) {
		return p.cfg.EC2.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{SubnetIds: []string{h.subnet}})
	})
	if err != nil {
		return host{}, err
	}
	if len(subs.Subnets) != 1 {
		return host{}, fmt.Errorf("subnet %s of instance %s: EC2 does not know it", h.subnet, p.cfg.InstanceID)
	}
	if h.subnetCIDR, err = netip.ParsePrefix(aws.ToString(subs.Subnets[0].CidrBlock)); err != nil {
		return host{}, fmt.Errorf("subnet %s: %w", h.subnet, err)
	}
	vpcs, err := call(ctx, p.ec2, "DescribeVpcs", func(ctx context.Context) (*ec2.DescribeVpcsOutput, error) {
		return p.cfg.EC2.DescribeVpcs(ctx, &ec2.DescribeVpcsInput{VpcIds: []string{aws.ToString(in.VpcId)}})
	})
	if err != nil {
		return host{}, err
	}
	for _, v := range vpcs.Vpcs {
		for _, a := range v.CidrBlockAssociationSet {
			if a.CidrBlockState != nil && a.CidrBlockState.State != ec2types.VpcCidrBlockStateCodeAssociated {
				continue
			}
			c, err := netip.ParsePrefix(aws.ToString(a.CidrBlock))
			if err != nil {
				return host{}, fmt.Errorf("VPC %s: %w", aws.ToString(v.VpcId), err)
			}
			h.vpcCIDRs = append(h.vpcCIDRs, c)
		}
	}
	if len(h.vpcCIDRs) == 0 {
		return host{}, fmt.Errorf("VPC %s of instance %s: EC2 gives it no CIDR", aws.ToString(in.VpcId), p.cfg.InstanceID)
	}
	return h, nil
}

// attached lists the pool's ENIs attached to the instance, by device
// index, and the device indexes other ENIs hold. An ENI of the pool's whose
// detach has begun (a shrink cut off after its detach) is not the pool's
// any more: its index is held until EC2 finishes, and leaving says so,
// so that a later sync deletes it once it is unattached.
func (p *Pool) attached(ctx context.Context) (enis []*ENI, others []int, leaving int, err error) {
	out, err := call(ctx, p.ec2, "DescribeNetworkInterfaces", func(ctx context.Context) (*ec2.DescribeNetworkInterfacesOutput, error) {
		return p.cfg.EC2.DescribeNetworkInterfaces(ctx, &ec2.DescribeNetworkInterfacesInput{
			Filters: []ec2types.Filter{{Name: aws.String("attachment.instance-id"), Values: []string{p.cfg.InstanceID}}},
		})
	})
	if err != nil {
		return nil, nil, 0, err
	}
	for _, ni := range out.NetworkInterfaces {
		e, err := fromEC2(ni)
		if err != nil {
			return nil, nil, 0, err
		}
		// The primary ENI, and the ENIs netd made: another ENI on the
		// instance (EFA, a trunk, another tool's) is not the pool's.
		if e.Device != 0 && !madeBy(ni.TagSet, p.cfg.InstanceID) {
			others = append(others, e.Device)
			continue
		}
		if e.Device != 0 && detaching(ni.Attachment) {
			others = append(others, e.Device)
			leaving++
			continue
		}
		enis = append(enis, e)
	}
	slices.SortFunc(enis, func(a, b *ENI) int { return a.Device - b.Device })
	return enis, others, leaving, nil
}

// detaching reports whether an attachment is on its way out.
func detaching(a *ec2types.NetworkInterfaceAttachment) bool {
	return a != nil && (a.Status == ec2types.AttachmentStatusDetaching || a.Status == ec2types.AttachmentStatusDetached)
}

func fromEC2(ni ec2types.NetworkInterface) (*ENI, error) {
	e := &ENI{ID: aws.ToString(ni.NetworkInterfaceId), MAC: aws.ToString(ni.MacAddress), Subnet: aws.ToString(ni.SubnetId), releasing: map[netip.Addr]bool{}}
	if ni.Attachment != nil {
		e.Attachment = aws.ToString(ni.Attachment.AttachmentId)
		e.Device = int(aws.ToInt32(ni.Attachment.DeviceIndex))
	}
	e.unwired = e.Device > 0
	for _, a := range ni.PrivateIpAddresses {
		ip, err := netip.ParseAddr(aws.ToString(a.PrivateIpAddress))
		if err != nil {
			return nil, fmt.Errorf("ENI %s: %w", e.ID, err)
		}
		if aws.ToBool(a.Primary) {
			e.Primary = ip
		} else {
			e.Addresses = append(e.Addresses, ip)
		}
	}
	return e, nil
}

// addAddresses asks EC2 for n more secondary addresses on e.
func (p *Pool) addAddresses(ctx context.Context, e *ENI, n int) ([]netip.Addr, error) {
	out, err := call(ctx, p.ec2, "AssignPrivateIpAddresses", func(ctx context.Context) (*ec2.AssignPrivateIpAddressesOutput, error) {
		return p.cfg.EC2.AssignPrivateIpAddresses(ctx, &ec2.AssignPrivateIpAddressesInput{
			NetworkInterfaceId: aws.String(e.ID), SecondaryPrivateIpAddressCount: aws.Int32(int32(n)),
		})
	})
	if err != nil {
		return nil, fmt.Errorf("ENI %s: %w", e.ID, err)
	}
	var got []netip.Addr
	for _, a := range out.AssignedPrivateIpAddresses {
		ip, err := netip.ParseAddr(aws.ToString(a.PrivateIpAddress))
		if err != nil {
			return nil, fmt.Errorf("ENI %s: %w", e.ID, err)
		}
		// EC2 answers with the new addresses; the emulator with all of
		// them (emulator workaround: a union is right for both).
		if ip != e.Primary {
			got = append(got, ip)
		}
	}
	return got, nil
}

// newENI creates an ENI in the node's subnet with n secondary addresses,
// tagged as this node's, and attaches it at device.
func (p *Pool) newENI(ctx context.Context, device, n int) (*ENI, error) {
	tags := []ec2types.Tag{
		{Key: aws.String(TagInstance), Value: aws.String(p.cfg.InstanceID)},
		{Key: aws.String(TagCreatedAt), Value: aws.String(p.clock.Now().UTC().Format(time.RFC3339))},
	}
	if p.cfg.Cluster != "" {
		tags = append(tags, ec2types.Tag{Key: aws.String(TagCluster), Value: aws.String(p.cfg.Cluster)})
	}
	out, err := call(ctx, p.ec2, "CreateNetworkInterface", func(ctx context.Context) (*ec2.CreateNetworkInterfaceOutput, error) {
		return p.cfg.EC2.CreateNetworkInterface(ctx, &ec2.CreateNetworkInterfaceInput{
			SubnetId: aws.String(p.host.subnet), Groups: p.host.groups,
			Description:                    aws.String("trellis-netd pod addresses of " + p.cfg.InstanceID),
			SecondaryPrivateIpAddressCount: aws.Int32(int32(n)),
			TagSpecifications:              []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeNetworkInterface, Tags: tags}},
		})
	})
	if err != nil {
		return nil, err
	}
	e, err := fromEC2(*out.NetworkInterface)
	if err != nil {
		return nil, err
	}
	att, err := call(ctx, p.ec2, "AttachNetworkInterface", func(ctx context.Context) (*ec2.AttachNetworkInterfaceOutput, error) {
		return p.cfg.EC2.AttachNetworkInterface(ctx, &ec2.AttachNetworkInterfaceInput{
			NetworkInterfaceId: aws.String(e.ID), InstanceId: aws.String(p.cfg.InstanceID), DeviceIndex: aws.Int32(int32(device)),
		})
	})
	if err != nil {
		// Not attached: delete it now rather than leave it to the
		// leak collector.
		_ = p.deleteENI(context.WithoutCancel(ctx), e.ID) // logged there
		return nil, err
	}
	e.Attachment, e.Device, e.unwired = aws.ToString(att.AttachmentId), device, true
	// The ENI goes when the instance does.
	if _, err := call(ctx, p.ec2, "ModifyNetworkInterfaceAttribute", func(ctx context.Context) (*ec2.ModifyNetworkInterfaceAttributeOutput, error) {
		return p.cfg.EC2.ModifyNetworkInterfaceAttribute(ctx, &ec2.ModifyNetworkInterfaceAttributeInput{
			NetworkInterfaceId: aws.String(e.ID),
			Attachment:         &ec2types.NetworkInterfaceAttachmentChanges{AttachmentId: aws.String(e.Attachment), DeleteOnTermination: aws.Bool(true)},
		})
	}); err != nil {
		p.log.Warn("failed to set delete-on-termination; the ENI outlives the instance until the leak collector finds it", "eni", e.ID, "err", err)
	}
	return e, nil
}

// removeENI detaches e, waits for EC2 to see it detached, and deletes it.
func (p *Pool) removeENI(ctx context.Context, e *ENI) error {
	if _, err := call(ctx, p.ec2, "DetachNetworkInterface", func(ctx context.Context) (*ec2.DetachNetworkInterfaceOutput, error) {
		return p.cfg.EC2.DetachNetworkInterface(ctx, &ec2.DetachNetworkInterfaceInput{AttachmentId: aws.String(e.Attachment)})
	}); err != nil {
		return fmt.Errorf("ENI %s: %w", e.ID, err)
	}
	wait := 500 * time.Millisecond
	for range 10 {
		out, err := call(ctx, p.ec2, "DescribeNetworkInterfaces", func(ctx context.Context) (*ec2.DescribeNetworkInterfacesOutput, error) {
			return p.cfg.EC2.DescribeNetworkInterfaces(ctx, &ec2.DescribeNetworkInterfacesInput{NetworkInterfaceIds: []string{e.ID}})
		})
		if err != nil {
			return fmt.Errorf("ENI %s: %w", e.ID, err)
		}
		if len(out.NetworkInterfaces) == 1 && out.NetworkInterfaces[0].Status == ec2types.NetworkInterfaceStatusAvailable {
			return p.deleteENI(ctx, e.ID)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-p.clock.After(wait):
		}
		wait = min(2*wait, 5*time.Second)
	}
	return fmt.Errorf("ENI %s: still attached after detaching; the leak collector deletes it later", e.ID)
}

func (p *Pool) deleteENI(ctx context.Context, id string) error {
	_, err := call(ctx, p.ec2, "DeleteNetworkInterface", func(ctx context.Context) (*ec2.DeleteNetworkInterfaceOutput, error) {
		return p.cfg.EC2.DeleteNetworkInterface(ctx, &ec2.DeleteNetworkInterfaceInput{NetworkInterfaceId: aws.String(id)})
	})
	if err != nil {
		p.log.Warn("failed to delete an ENI", "eni", id, "err", err)
		return fmt.Errorf("ENI %s: %w", id, err)
	}
	return nil
}

// collectLeaked deletes this node's ENIs that are not attached: created
// by a netd that died before attaching them, or by a create or detach
// whose caller gave up. They are only looked for when no creation of this
// node's can be in flight (at start, and in a reconcile after a failed
// change, under the change lock).
func (p *Pool) collectLeaked(ctx context.Context) (int, error) {
	out, err := call(ctx, p.ec2, "DescribeNetworkInterfaces", func(ctx context.Context) (*ec2.DescribeNetworkInterfacesOutput, error) {
		return p.cfg.EC2.DescribeNetworkInterfaces(ctx, &ec2.DescribeNetworkInterfacesInput{Filters: []ec2types.Filter{
			{Name: aws.String("tag:" + TagInstance), Values: []string{p.cfg.InstanceID}},
			{Name: aws.String("status"), Values: []string{string(ec2types.NetworkInterfaceStatusAvailable)}},
		}})
	})
	if err != nil {
		return 0, err
	}
	n := 0
	for _, ni := range out.NetworkInterfaces {
		if err := p.deleteENI(ctx, aws.ToString(ni.NetworkInterfaceId)); err != nil {
			return n, err
		}
		p.log.Info("deleted a leaked ENI", "eni", aws.ToString(ni.NetworkInterfaceId))
		n++
	}
	return n, nil
}

// wire readies the secondary ENIs that are not ready yet (Config.Wire);
// one that fails stays closed to pods until a later sync wires it.
func (p *Pool) wire(ctx context.Context) {
	p.mu.Lock()
	var todo []*ENI
	for _, e := range p.enis {
		if e.unwired {
			if p.cfg.Wire == nil {
				e.unwired = false
				continue
			}
			todo = append(todo, e)
		}
	}
	p.mu.Unlock()
	for _, e := range todo {
		c := *e
		c.Addresses, c.releasing, c.CIDR = slices.Clone(e.Addresses), nil, p.host.subnetCIDR
		if err := p.cfg.Wire(ctx, c); err != nil {
			p.log.Warn("secondary ENI not ready on the node yet; its addresses wait", "eni", e.ID, "device", e.Device, "err", err)
			continue
		}
		p.mu.Lock()
		e.unwired = false
		p.mu.Unlock()
	}
}

func madeBy(tags []ec2types.Tag, instance string) bool {
	for _, t := range tags {
		if aws.ToString(t.Key) == TagInstance && aws.ToString(t.Value) == instance {
			return true
		}
	}
	return false
}
