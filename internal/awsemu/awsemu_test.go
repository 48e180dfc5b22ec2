package awsemu_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	asgtypes "github.com/aws/aws-sdk-go-v2/service/autoscaling/types"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go"

	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2"
	elbtypes "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2/types"
	"github.com/trellis-dev/trellis/internal/awsemu"
	"github.com/trellis-dev/trellis/internal/awsemu/awsemutest"
)

func TestIntegrationEmulator(t *testing.T) {
	ctx := context.Background()
	s := awsemutest.Start(t)
	p := awsemutest.Proxy(t, s)
	seed := awsemu.NewClients(p.URL, "us-east-1")

	// Launcher fix 6: RegisterImage keeps the architecture.
	id, err := seed.Image(ctx, "trellis-node-arm", "arm64")
	if err != nil {
		t.Fatal(err)
	}
	out, err := seed.EC2.DescribeImages(ctx, &ec2.DescribeImagesInput{ImageIds: []string{id}})
	if err != nil || len(out.Images) != 1 {
		t.Fatalf("DescribeImages %s: %v", id, err)
	}
	if got := string(out.Images[0].Architecture); got != "arm64" {
		t.Errorf("image architecture %q, want arm64", got)
	}

	// The proxy refuses exactly the calls it is told to, in each protocol's shape.
	p.Refuse("RegisterImage", 1)
	p.Refuse("PutParameter", 1)
	p.Refuse("S3:PUT", 1)
	var api smithy.APIError
	if _, err := seed.Image(ctx, "refused", "x86_64"); !errors.As(err, &api) || api.ErrorCode() != awsemu.FaultCode {
		t.Errorf("EC2 call through the fault proxy: %v, want %s", err, awsemu.FaultCode)
	}
	if err := seed.Parameter(ctx, "/trellis/x", "y"); !errors.As(err, &api) || api.ErrorCode() != awsemu.FaultCode {
		t.Errorf("SSM call through the fault proxy: %v, want %s", err, awsemu.FaultCode)
	}
	if err := seed.Bucket(ctx, "refused"); !errors.As(err, &api) || api.ErrorCode() != "AccessDenied" {
		t.Errorf("S3 call through the fault proxy: %v, want AccessDenied", err)
	}
	if _, err := seed.Image(ctx, "passes", "x86_64"); err != nil {
		t.Errorf("second RegisterImage must pass: %v", err)
	}
	if err := seed.Parameter(ctx, "/trellis/x", "y"); err != nil {
		t.Errorf("second PutParameter must pass: %v", err)
	}
	if n := p.Calls()["RegisterImage"]; n != 3 {
		t.Errorf("proxy counted %d RegisterImage calls, want 3", n)
	}

	if err := s.Reset(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := seed.EC2.DescribeImages(ctx, &ec2.DescribeImagesInput{ImageIds: []string{id}}); err == nil {
		t.Errorf("image %s survived a reset", id)
	}
}

// Launcher fix 7: terminating an instance no group holds is a
// ValidationError (the rollout treats it as done), not HTTP 500.
func TestIntegrationTerminateUnknownInstance(t *testing.T) {
	s := awsemutest.Start(t)
	c := awsemu.NewClients(s.URL, "us-east-1")
	_, err := c.ASG.TerminateInstanceInAutoScalingGroup(context.Background(), &autoscaling.TerminateInstanceInAutoScalingGroupInput{
		InstanceId: aws.String("i-0123456789abcdef0"), ShouldDecrementDesiredCapacity: aws.Bool(true)})
	var api smithy.APIError
	if !errors.As(err, &api) || api.ErrorCode() != "ValidationError" || !strings.Contains(api.ErrorMessage(), "not found") {
		t.Fatalf("terminate of an unknown instance: %v, want ValidationError ... not found", err)
	}
}

// Fix 9: a /28 has 11 usable addresses (AWS reserves five); handed out by
// ENI creation and by secondary assignment, each comes once, and the 12th
// is refused.
func TestIntegrationPrivateAddressesUniqueInSubnet(t *testing.T) {
	s := awsemutest.Start(t)
	c := awsemu.NewClients(s.URL, "us-east-1")
	ctx := context.Background()
	v, err := c.EC2.CreateVpc(ctx, &ec2.CreateVpcInput{CidrBlock: aws.String("10.9.0.0/16")})
	if err != nil {
		t.Fatal(err)
	}
	sub, err := c.EC2.CreateSubnet(ctx, &ec2.CreateSubnetInput{VpcId: v.Vpc.VpcId, CidrBlock: aws.String("10.9.0.0/28")})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	note := func(addrs ...string) {
		for _, a := range addrs {
			if seen[a] {
				t.Fatalf("address %s handed out twice", a)
			}
			if a == "10.9.0.0" || a == "10.9.0.1" || a == "10.9.0.2" || a == "10.9.0.3" || a == "10.9.0.15" {
				t.Fatalf("address %s is one AWS reserves", a)
			}
			seen[a] = true
		}
	}
	eni, err := c.EC2.CreateNetworkInterface(ctx, &ec2.CreateNetworkInterfaceInput{SubnetId: sub.Subnet.SubnetId, SecondaryPrivateIpAddressCount: aws.Int32(5)})
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range eni.NetworkInterface.PrivateIpAddresses {
		note(aws.ToString(a.PrivateIpAddress))
	}
	if _, err := c.EC2.AssignPrivateIpAddresses(ctx, &ec2.AssignPrivateIpAddressesInput{NetworkInterfaceId: eni.NetworkInterface.NetworkInterfaceId, SecondaryPrivateIpAddressCount: aws.Int32(5)}); err != nil {
		t.Fatal(err)
	}
	d, err := c.EC2.DescribeNetworkInterfaces(ctx, &ec2.DescribeNetworkInterfacesInput{NetworkInterfaceIds: []string{aws.ToString(eni.NetworkInterface.NetworkInterfaceId)}})
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range d.NetworkInterfaces[0].PrivateIpAddresses {
		if ip := aws.ToString(a.PrivateIpAddress); !seen[ip] {
			note(ip)
		}
	}
	if len(seen) != 11 {
		t.Fatalf("%d distinct addresses on the ENI, want 11", len(seen))
	}
	_, err = c.EC2.CreateNetworkInterface(ctx, &ec2.CreateNetworkInterfaceInput{SubnetId: sub.Subnet.SubnetId})
	var api smithy.APIError
	if !errors.As(err, &api) || api.ErrorCode() != "InsufficientFreeAddressesInSubnet" {
		t.Fatalf("an ENI in a full subnet: %v, want InsufficientFreeAddressesInSubnet", err)
	}
}

// Fix 10: a launch template with an instance-store mapping (what kops
// writes for g5, p5, m6id, c6id, i4i) launches through an autoscaling
// group and through RunInstances; the template keeps the mapping as
// written, and only the Ebs mappings become volumes, as on AWS.
func TestIntegrationInstanceStoreMappings(t *testing.T) {
	s := awsemutest.Start(t)
	c := awsemu.NewClients(s.URL, "us-east-1")
	ctx := context.Background()
	ami, err := c.Image(ctx, "trellis-node", "x86_64")
	if err != nil {
		t.Fatal(err)
	}
	lt, err := c.EC2.CreateLaunchTemplate(ctx, &ec2.CreateLaunchTemplateInput{
		LaunchTemplateName: aws.String("nvme"),
		LaunchTemplateData: &ec2types.RequestLaunchTemplateData{
			ImageId: aws.String(ami), InstanceType: ec2types.InstanceTypeM6idLarge,
			BlockDeviceMappings: []ec2types.LaunchTemplateBlockDeviceMappingRequest{
				{DeviceName: aws.String("/dev/xvda"), Ebs: &ec2types.LaunchTemplateEbsBlockDeviceRequest{VolumeSize: aws.Int32(64), VolumeType: ec2types.VolumeTypeGp3}},
				{DeviceName: aws.String("/dev/sdc"), VirtualName: aws.String("ephemeral0")},
			},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	id := lt.LaunchTemplate.LaunchTemplateId
	_, err = c.ASG.CreateAutoScalingGroup(ctx, &autoscaling.CreateAutoScalingGroupInput{
		AutoScalingGroupName: aws.String("nvme"), MinSize: aws.Int32(1), MaxSize: aws.Int32(1), DesiredCapacity: aws.Int32(1),
		AvailabilityZones: []string{"us-east-1a"},
		LaunchTemplate:    &asgtypes.LaunchTemplateSpecification{LaunchTemplateId: id, Version: aws.String("$Latest")},
	})
	if err != nil {
		t.Fatalf("an autoscaling group from a template with an instance-store mapping: %v", err)
	}
	g, err := c.ASG.DescribeAutoScalingGroups(ctx, &autoscaling.DescribeAutoScalingGroupsInput{AutoScalingGroupNames: []string{"nvme"}})
	if err != nil || len(g.AutoScalingGroups) != 1 || len(g.AutoScalingGroups[0].Instances) != 1 {
		t.Fatalf("group nvme: %v, %+v; want one instance", err, g)
	}
	run, err := c.EC2.RunInstances(ctx, &ec2.RunInstancesInput{MinCount: aws.Int32(1), MaxCount: aws.Int32(1), ImageId: aws.String(ami),
		LaunchTemplate: &ec2types.LaunchTemplateSpecification{LaunchTemplateId: id}})
	if err != nil {
		t.Fatalf("RunInstances from the template: %v", err)
	}
	for _, iid := range []string{aws.ToString(g.AutoScalingGroups[0].Instances[0].InstanceId), aws.ToString(run.Instances[0].InstanceId)} {
		d, err := c.EC2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{iid}})
		if err != nil {
			t.Fatal(err)
		}
		var devs []string
		for _, m := range d.Reservations[0].Instances[0].BlockDeviceMappings {
			devs = append(devs, aws.ToString(m.DeviceName))
		}
		if !slices.Contains(devs, "/dev/xvda") || slices.Contains(devs, "/dev/sdc") {
			t.Errorf("instance %s has volumes %v; want the template's EBS /dev/xvda and no volume for the instance store /dev/sdc", iid, devs)
		}
	}
	v, err := c.EC2.DescribeLaunchTemplateVersions(ctx, &ec2.DescribeLaunchTemplateVersionsInput{LaunchTemplateId: id})
	if err != nil || len(v.LaunchTemplateVersions) != 1 {
		t.Fatalf("template versions: %v", err)
	}
	m := v.LaunchTemplateVersions[0].LaunchTemplateData.BlockDeviceMappings
	if len(m) != 2 || aws.ToString(m[1].DeviceName) != "/dev/sdc" || aws.ToString(m[1].VirtualName) != "ephemeral0" || m[1].Ebs != nil {
		t.Errorf("the template's mappings: %+v; want /dev/sdc as ephemeral0 without Ebs, as written", m)
	}
}

// Fixes 11 and 12: deleting a subnet drops its route-table associations, so the
// route table and then the VPC can be deleted (what `cluster delete` does).
func TestIntegrationDeleteSubnetFreesRouteTable(t *testing.T) {
	s := awsemutest.Start(t)
	c := awsemu.NewClients(s.URL, "us-east-1")
	ctx := context.Background()
	v, err := c.EC2.CreateVpc(ctx, &ec2.CreateVpcInput{CidrBlock: aws.String("10.5.0.0/16")})
	if err != nil {
		t.Fatal(err)
	}
	sub, err := c.EC2.CreateSubnet(ctx, &ec2.CreateSubnetInput{VpcId: v.Vpc.VpcId, CidrBlock: aws.String("10.5.0.0/24")})
	if err != nil {
		t.Fatal(err)
	}
	rt, err := c.EC2.CreateRouteTable(ctx, &ec2.CreateRouteTableInput{VpcId: v.Vpc.VpcId})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.EC2.AssociateRouteTable(ctx, &ec2.AssociateRouteTableInput{RouteTableId: rt.RouteTable.RouteTableId, SubnetId: sub.Subnet.SubnetId}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.EC2.DeleteSubnet(ctx, &ec2.DeleteSubnetInput{SubnetId: sub.Subnet.SubnetId}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.EC2.DeleteRouteTable(ctx, &ec2.DeleteRouteTableInput{RouteTableId: rt.RouteTable.RouteTableId}); err != nil {
		t.Fatalf("route table of a deleted subnet: %v, want it deletable", err)
	}
	// Fix 12: the VPC's DHCP options set outlives it, as on AWS, and is
	// deleted after it (kops's order).
	d, err := c.EC2.CreateDhcpOptions(ctx, &ec2.CreateDhcpOptionsInput{DhcpConfigurations: []ec2types.NewDhcpConfiguration{{Key: aws.String("domain-name"), Values: []string{"x.internal"}}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.EC2.AssociateDhcpOptions(ctx, &ec2.AssociateDhcpOptionsInput{DhcpOptionsId: d.DhcpOptions.DhcpOptionsId, VpcId: v.Vpc.VpcId}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.EC2.DeleteVpc(ctx, &ec2.DeleteVpcInput{VpcId: v.Vpc.VpcId}); err != nil {
		t.Fatalf("VPC: %v", err)
	}
	if _, err := c.EC2.DeleteDhcpOptions(ctx, &ec2.DeleteDhcpOptionsInput{DhcpOptionsId: d.DhcpOptions.DhcpOptionsId}); err != nil {
		t.Fatalf("DHCP options of a deleted VPC: %v, want them there to delete", err)
	}
}

// Fix 13: an autoscaling group whose target group is gone (a delete pass
// removed it first) is still deleted, as on AWS.
func TestIntegrationDeleteGroupAfterItsTargetGroup(t *testing.T) {
	s := awsemutest.Start(t)
	c := awsemu.NewClients(s.URL, "us-east-1")
	ctx := context.Background()
	elb := elasticloadbalancingv2.NewFromConfig(aws.Config{
		Region: "us-east-1", BaseEndpoint: aws.String(s.URL),
		Credentials: credentials.NewStaticCredentialsProvider("trellis-emulator", "trellis-emulator", ""),
	})
	v, err := c.EC2.CreateVpc(ctx, &ec2.CreateVpcInput{CidrBlock: aws.String("10.6.0.0/16")})
	if err != nil {
		t.Fatal(err)
	}
	tg, err := elb.CreateTargetGroup(ctx, &elasticloadbalancingv2.CreateTargetGroupInput{
		Name: aws.String("tcp-api"), Protocol: elbtypes.ProtocolEnumTcp, Port: aws.Int32(443), VpcId: v.Vpc.VpcId,
	})
	if err != nil {
		t.Fatal(err)
	}
	arn := tg.TargetGroups[0].TargetGroupArn
	ami, err := c.Image(ctx, "trellis-node", "x86_64")
	if err != nil {
		t.Fatal(err)
	}
	lt, err := c.EC2.CreateLaunchTemplate(ctx, &ec2.CreateLaunchTemplateInput{
		LaunchTemplateName: aws.String("api"),
		LaunchTemplateData: &ec2types.RequestLaunchTemplateData{ImageId: aws.String(ami), InstanceType: ec2types.InstanceTypeM5Large},
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.ASG.CreateAutoScalingGroup(ctx, &autoscaling.CreateAutoScalingGroupInput{
		AutoScalingGroupName: aws.String("api"), MinSize: aws.Int32(1), MaxSize: aws.Int32(1), DesiredCapacity: aws.Int32(1),
		AvailabilityZones: []string{"us-east-1a"}, TargetGroupARNs: []string{*arn},
		LaunchTemplate: &asgtypes.LaunchTemplateSpecification{LaunchTemplateId: lt.LaunchTemplate.LaunchTemplateId, Version: aws.String("$Latest")},
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := elb.DeleteTargetGroup(ctx, &elasticloadbalancingv2.DeleteTargetGroupInput{TargetGroupArn: arn}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ASG.DeleteAutoScalingGroup(ctx, &autoscaling.DeleteAutoScalingGroupInput{AutoScalingGroupName: aws.String("api"), ForceDelete: aws.Bool(true)}); err != nil {
		t.Fatalf("delete a group whose target group is gone: %v, want it deleted", err)
	}
}
