// Package fakeaws installs kops's in-memory AWS fake (k8s.io/kops/cloudmock)
// as the cloud kops talks to, with the gaps Trellis hits wrapped. It exists
// because AWS cannot run here: tests and `--fake-aws` plans use it; nothing
// it creates exists anywhere.
package fakeaws

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	autoscalingtypes "github.com/aws/aws-sdk-go-v2/service/autoscaling/types"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	elbv2 "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2"
	elbv2types "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2/types"
	"k8s.io/kops/cloudmock/aws/mockautoscaling"
	"k8s.io/kops/cloudmock/aws/mockec2"
	"k8s.io/kops/cloudmock/aws/mockelb"
	"k8s.io/kops/cloudmock/aws/mockelbv2"
	"k8s.io/kops/cloudmock/aws/mockeventbridge"
	"k8s.io/kops/cloudmock/aws/mockiam"
	"k8s.io/kops/cloudmock/aws/mockroute53"
	"k8s.io/kops/cloudmock/aws/mocksqs"
	"k8s.io/kops/upup/pkg/fi"
	"k8s.io/kops/upup/pkg/fi/cloudup/awsup"
	"k8s.io/kops/util/pkg/awsinterfaces"

	"github.com/trellis-dev/trellis/bootstrap/definition"
)

// Cloud is the installed fake with typed access to its parts.
type Cloud struct {
	*awsup.MockAWSCloud
	FakeEC2         *mockec2.MockEC2
	FakeAutoscaling *mockautoscaling.MockAutoscaling
	FakeELBV2       *mockelbv2.MockELBV2
	FakeIAM         *mockiam.MockIAM

	ec2      *ec2Fixes
	launched int
	// asgMu serializes LaunchInstances with the autoscaling calls, since
	// it edits the fake's groups directly.
	asgMu sync.Mutex
}

// Install makes kops's cloud lookups for region return a fake AWS with the
// given zones and AMIs. zones are full names (us-east-1a).
func Install(region string, zones []string, images []string) (*Cloud, error) {
	letters := ""
	for _, z := range zones {
		if !strings.HasPrefix(z, region) || len(z) != len(region)+1 {
			return nil, fmt.Errorf("zone %q is not a zone of region %q", z, region)
		}
		letters += z[len(region):]
	}
	mc := awsup.InstallMockAWSCloud(region, letters)
	ec2 := &mockec2.MockEC2{}
	c := &Cloud{
		MockAWSCloud:    mc,
		FakeEC2:         ec2,
		FakeAutoscaling: &mockautoscaling.MockAutoscaling{},
		FakeELBV2:       &mockelbv2.MockELBV2{EC2: ec2},
		FakeIAM:         &mockiam.MockIAM{},
	}
	// Instances are terminated through the autoscaling fake, so that a
	// terminated instance leaves its group.
	c.ec2 = &ec2Fixes{
		EC2API:    c.FakeAutoscaling.GetEC2Shim(ec2),
		mock:      ec2,
		versions:  map[string]int64{},
		instances: map[string]*ec2types.Instance{},
	}
	mc.MockEC2 = c.ec2
	mc.MockAutoscaling = &asgFixes{AutoScalingAPI: c.FakeAutoscaling, c: c}
	mc.MockELBV2 = elbv2Fixes{c.FakeELBV2}
	mc.MockIAM = c.FakeIAM
	mc.MockRoute53 = &mockroute53.MockRoute53{}
	mc.MockELB = &mockelb.MockELB{}
	mc.MockSQS = &mocksqs.MockSQS{}
	mc.MockEventBridge = &mockeventbridge.MockEventBridge{}
	for _, id := range images {
		c.AddImage(id, ec2types.ArchitectureValuesX8664)
	}
	return c, nil
}

// ForDefinition installs the fake for a definition: its region and zones,
// and its images, each of its group's architecture.
func ForDefinition(def *definition.ClusterDefinition) (*Cloud, error) {
	c, err := Install(def.Region, def.Zones, []string{def.ControlPlane.Image})
	if err != nil {
		return nil, err
	}
	for _, ig := range def.InstanceGroups {
		arch := ec2types.ArchitectureValuesX8664
		if ig.Architecture == definition.ArchARM64 {
			arch = ec2types.ArchitectureValuesArm64
		}
		c.AddImage(ig.Image, arch)
	}
	return c, nil
}

// AddImage registers an AMI id (ami-...) of an architecture so instance
// groups can use it.
func (c *Cloud) AddImage(id string, arch ec2types.ArchitectureValues) {
	if !strings.HasPrefix(id, "ami-") {
		return
	}
	for _, img := range c.FakeEC2.Images {
		if aws.ToString(img.ImageId) == id {
			return
		}
	}
	c.FakeEC2.Images = append(c.FakeEC2.Images, &ec2types.Image{
		CreationDate:   aws.String("2026-01-01T00:00:00.000Z"),
		ImageId:        aws.String(id),
		Name:           aws.String("trellis-fake/" + id),
		OwnerId:        aws.String(awsup.WellKnownAccountUbuntu),
		RootDeviceName: aws.String("/dev/xvda"),
		Architecture:   arch,
	})
}

// ResourceIDs lists every EC2 resource the fake holds (vpc-..., subnet-...).
func (c *Cloud) ResourceIDs() []string {
	var ids []string
	for id := range c.FakeEC2.All() {
		ids = append(ids, id)
	}
	return ids
}

// DescribeInstanceType answers for any instance type, which kops's fake only
// does for a handful: the architecture follows the AWS naming scheme
// (definition.MachineArchitecture: m7g is Graviton), GPU families carry a GPU.
func (c *Cloud) DescribeInstanceType(instanceType string) (*ec2types.InstanceTypeInfo, error) {
	info, err := c.MockAWSCloud.DescribeInstanceType(instanceType)
	if err != nil || info.ProcessorInfo != nil {
		return info, err
	}
	family, _, ok := strings.Cut(instanceType, ".")
	if !ok || len(family) < 2 {
		return nil, fmt.Errorf("invalid instance type %q specified", instanceType)
	}
	arch := ec2types.ArchitectureTypeX8664
	if definition.MachineArchitecture(instanceType) == definition.ArchARM64 {
		arch = ec2types.ArchitectureTypeArm64
	}
	info.ProcessorInfo = &ec2types.ProcessorInfo{SupportedArchitectures: []ec2types.ArchitectureType{arch}}
	switch family[0] {
	case 'p', 'g':
		info.GpuInfo = &ec2types.GpuInfo{}
	}
	return info, nil
}

// elbv2Fixes mends two gaps of kops's ELBv2 fake: load balancers have no
// state (kops waits for active after creating one), and target groups forget
// the health-check path and matcher they were created with (so every plan
// would show a change).
type elbv2Fixes struct {
	*mockelbv2.MockELBV2
}

func (m elbv2Fixes) DescribeLoadBalancers(ctx context.Context, in *elbv2.DescribeLoadBalancersInput, optFns ...func(*elbv2.Options)) (*elbv2.DescribeLoadBalancersOutput, error) {
	out, err := m.MockELBV2.DescribeLoadBalancers(ctx, in, optFns...)
	if err != nil {
		return nil, err
	}
	for i := range out.LoadBalancers {
		if out.LoadBalancers[i].State == nil {
			out.LoadBalancers[i].State = &elbv2types.LoadBalancerState{Code: elbv2types.LoadBalancerStateEnumActive}
		}
	}
	return out, nil
}

// ec2Fixes mends gaps of kops's EC2 fake: it reports launch-template
// version numbers (which the fake tracks but never returns, and kops compares
// to find outdated instances), and it keeps instances, which the fake's
// DescribeInstances does not. Terminations go on to the autoscaling fake's
// shim, so a terminated instance also leaves its group.
type ec2Fixes struct {
	awsinterfaces.EC2API
	mock *mockec2.MockEC2

	mu        sync.Mutex
	versions  map[string]int64
	instances map[string]*ec2types.Instance
}

func (m *ec2Fixes) CreateLaunchTemplate(ctx context.Context, in *ec2.CreateLaunchTemplateInput, optFns ...func(*ec2.Options)) (*ec2.CreateLaunchTemplateOutput, error) {
	out, err := m.EC2API.CreateLaunchTemplate(ctx, in, optFns...)
	if err == nil && out.LaunchTemplate != nil {
		m.mu.Lock()
		m.versions[aws.ToString(out.LaunchTemplate.LaunchTemplateId)] = 1
		m.mu.Unlock()
	}
	return out, err
}

func (m *ec2Fixes) CreateLaunchTemplateVersion(ctx context.Context, in *ec2.CreateLaunchTemplateVersionInput, optFns ...func(*ec2.Options)) (*ec2.CreateLaunchTemplateVersionOutput, error) {
	out, err := m.EC2API.CreateLaunchTemplateVersion(ctx, in, optFns...)
	if err == nil && out != nil && out.LaunchTemplateVersion != nil {
		m.mu.Lock()
		m.versions[aws.ToString(out.LaunchTemplateVersion.LaunchTemplateId)] = aws.ToInt64(out.LaunchTemplateVersion.VersionNumber)
		m.mu.Unlock()
	}
	return out, err
}

func (m *ec2Fixes) DescribeLaunchTemplates(ctx context.Context, in *ec2.DescribeLaunchTemplatesInput, optFns ...func(*ec2.Options)) (*ec2.DescribeLaunchTemplatesOutput, error) {
	out, err := m.EC2API.DescribeLaunchTemplates(ctx, in, optFns...)
	if err != nil {
		return nil, err
	}
	ids := map[string]bool{}
	for _, id := range in.LaunchTemplateIds {
		ids[id] = true
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var kept []ec2types.LaunchTemplate
	for _, lt := range out.LaunchTemplates {
		id := aws.ToString(lt.LaunchTemplateId)
		if len(ids) > 0 && !ids[id] {
			continue // the fake ignores LaunchTemplateIds
		}
		v := m.versions[id]
		if v == 0 {
			v = 1
		}
		lt.LatestVersionNumber = aws.Int64(v)
		lt.DefaultVersionNumber = aws.Int64(v)
		kept = append(kept, lt)
	}
	out.LaunchTemplates = kept
	return out, nil
}

func (m *ec2Fixes) DescribeInstances(ctx context.Context, in *ec2.DescribeInstancesInput, optFns ...func(*ec2.Options)) (*ec2.DescribeInstancesOutput, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	ids := map[string]bool{}
	for _, id := range in.InstanceIds {
		ids[id] = true
	}
	var res ec2types.Reservation
	for id, inst := range m.instances {
		if len(ids) > 0 && !ids[id] {
			continue
		}
		if matches(inst, in.Filters) {
			res.Instances = append(res.Instances, *inst)
		}
	}
	out := &ec2.DescribeInstancesOutput{}
	if len(res.Instances) > 0 {
		out.Reservations = []ec2types.Reservation{res}
	}
	return out, nil
}

func matches(inst *ec2types.Instance, filters []ec2types.Filter) bool {
	for _, f := range filters {
		name := aws.ToString(f.Name)
		if name == "tag:"+awsup.TagClusterName && len(f.Values) == 1 && f.Values[0] == "" {
			// kops's fake cloud has no cluster tags (the real one does), so
			// kops asks for KubernetesCluster="": one fake cloud, one cluster.
			continue
		}
		var have string
		switch {
		case name == "instance-state-name":
			have = string(inst.State.Name)
		case name == "instance-id":
			have = aws.ToString(inst.InstanceId)
		case strings.HasPrefix(name, "tag:"):
			found := false
			for _, t := range inst.Tags {
				if aws.ToString(t.Key) == strings.TrimPrefix(name, "tag:") {
					have, found = aws.ToString(t.Value), true
				}
			}
			if !found {
				return false
			}
		default:
			return false
		}
		ok := false
		for _, v := range f.Values {
			ok = ok || v == have
		}
		if !ok {
			return false
		}
	}
	return true
}

func (m *ec2Fixes) TerminateInstances(ctx context.Context, in *ec2.TerminateInstancesInput, optFns ...func(*ec2.Options)) (*ec2.TerminateInstancesOutput, error) {
	if aws.ToBool(in.DryRun) {
		return &ec2.TerminateInstancesOutput{}, nil
	}
	m.mu.Lock()
	known := map[string]bool{}
	for _, id := range in.InstanceIds {
		if inst, ok := m.instances[id]; ok {
			inst.State = &ec2types.InstanceState{Name: ec2types.InstanceStateNameTerminated}
			known[id] = true
		}
	}
	m.mu.Unlock()
	out := &ec2.TerminateInstancesOutput{}
	for _, id := range in.InstanceIds {
		c := *in
		c.InstanceIds = []string{id}
		o, err := m.EC2API.TerminateInstances(ctx, &c, optFns...)
		// The shim only knows instances in a group: one detached from its
		// group (kops's surge) is "not found" there, yet AWS terminates it.
		detached := err != nil && known[id] && strings.Contains(err.Error(), "not found")
		if err != nil && !detached {
			return nil, err
		}
		if o != nil {
			out.TerminatingInstances = append(out.TerminatingInstances, o.TerminatingInstances...)
		}
	}
	return out, nil
}

// Instances returns the ids of instances that are not terminated.
func (c *Cloud) Instances() map[string]bool {
	c.ec2.mu.Lock()
	defer c.ec2.mu.Unlock()
	out := map[string]bool{}
	for id, inst := range c.ec2.instances {
		if inst.State.Name != ec2types.InstanceStateNameTerminated {
			out[id] = true
		}
	}
	return out
}

// LaunchTemplateVersion returns the current version of a launch template.
func (c *Cloud) LaunchTemplateVersion(id string) int64 {
	shim := c.MockEC2
	out, err := shim.DescribeLaunchTemplates(context.Background(), &ec2.DescribeLaunchTemplatesInput{LaunchTemplateIds: []string{id}})
	if err != nil || len(out.LaunchTemplates) == 0 {
		return 0
	}
	return aws.ToInt64(out.LaunchTemplates[0].LatestVersionNumber)
}

// LaunchInstances stands in for the instances AWS would launch to meet each
// group's desired capacity, which kops's fake never does: each gets the
// group's current launch-template version. It returns the new instance ids.
func (c *Cloud) LaunchInstances() []string {
	c.asgMu.Lock()
	defer c.asgMu.Unlock()
	var ids []string
	for _, g := range c.FakeAutoscaling.Groups {
		lt := g.LaunchTemplate
		if lt == nil && g.MixedInstancesPolicy != nil && g.MixedInstancesPolicy.LaunchTemplate != nil {
			lt = g.MixedInstancesPolicy.LaunchTemplate.LaunchTemplateSpecification
		}
		version := "1"
		var ltID *string
		if lt != nil {
			ltID = lt.LaunchTemplateId
			version = fmt.Sprint(c.LaunchTemplateVersion(aws.ToString(lt.LaunchTemplateId)))
		}
		want := aws.ToInt32(g.DesiredCapacity)
		if g.DesiredCapacity == nil {
			// AWS sets the desired capacity to the minimum at creation.
			want = aws.ToInt32(g.MinSize)
			g.DesiredCapacity = aws.Int32(want)
		}
		var tags []ec2types.Tag
		for _, t := range g.Tags {
			tags = append(tags, ec2types.Tag{Key: t.Key, Value: t.Value})
		}
		for int32(len(g.Instances)) < want {
			c.launched++
			id := fmt.Sprintf("i-fake%012d", c.launched)
			c.ec2.mu.Lock()
			c.ec2.instances[id] = &ec2types.Instance{
				InstanceId:       aws.String(id),
				InstanceType:     ec2types.InstanceType("m6i.large"),
				PrivateIpAddress: aws.String(fmt.Sprintf("10.255.%d.%d", c.launched/250, c.launched%250+1)),
				State:            &ec2types.InstanceState{Name: ec2types.InstanceStateNameRunning},
				Tags:             tags,
			}
			c.ec2.mu.Unlock()
			g.Instances = append(g.Instances, autoscalingtypes.Instance{
				InstanceId:     aws.String(id),
				LifecycleState: autoscalingtypes.LifecycleStateInService,
				HealthStatus:   aws.String("Healthy"),
				LaunchTemplate: &autoscalingtypes.LaunchTemplateSpecification{LaunchTemplateId: ltID, Version: aws.String(version)},
			})
			ids = append(ids, id)
		}
	}
	return ids
}

func (m elbv2Fixes) CreateTargetGroup(ctx context.Context, in *elbv2.CreateTargetGroupInput, optFns ...func(*elbv2.Options)) (*elbv2.CreateTargetGroupOutput, error) {
	out, err := m.MockELBV2.CreateTargetGroup(ctx, in, optFns...)
	if err != nil || len(out.TargetGroups) == 0 || in.HealthCheckPath == nil {
		return out, err
	}
	arn := out.TargetGroups[0].TargetGroupArn
	if _, err := m.ModifyTargetGroup(ctx, &elbv2.ModifyTargetGroupInput{
		TargetGroupArn:      arn,
		HealthCheckProtocol: in.HealthCheckProtocol,
		HealthCheckPath:     in.HealthCheckPath,
		Matcher:             in.Matcher,
	}); err != nil {
		return nil, err
	}
	out.TargetGroups[0].HealthCheckPath = in.HealthCheckPath
	out.TargetGroups[0].Matcher = in.Matcher
	return out, nil
}

// asgFixes: the fake's TerminateInstanceInAutoScalingGroup ignores
// ShouldDecrementDesiredCapacity and leaves the EC2 instance running; AWS
// decrements and terminates. Calls are serialized with LaunchInstances.
type asgFixes struct {
	awsinterfaces.AutoScalingAPI
	c *Cloud
}

func (m *asgFixes) TerminateInstanceInAutoScalingGroup(ctx context.Context, in *autoscaling.TerminateInstanceInAutoScalingGroupInput, optFns ...func(*autoscaling.Options)) (*autoscaling.TerminateInstanceInAutoScalingGroupOutput, error) {
	m.c.asgMu.Lock()
	defer m.c.asgMu.Unlock()
	var group *autoscalingtypes.AutoScalingGroup
	for _, g := range m.c.FakeAutoscaling.Groups {
		for _, i := range g.Instances {
			if aws.ToString(i.InstanceId) == aws.ToString(in.InstanceId) {
				group = g
			}
		}
	}
	out, err := m.AutoScalingAPI.TerminateInstanceInAutoScalingGroup(ctx, in, optFns...)
	if err != nil {
		return out, err
	}
	if group != nil && aws.ToBool(in.ShouldDecrementDesiredCapacity) && aws.ToInt32(group.DesiredCapacity) > 0 {
		group.DesiredCapacity = aws.Int32(aws.ToInt32(group.DesiredCapacity) - 1)
	}
	m.c.ec2.mu.Lock()
	if inst, ok := m.c.ec2.instances[aws.ToString(in.InstanceId)]; ok {
		inst.State = &ec2types.InstanceState{Name: ec2types.InstanceStateNameTerminated}
	}
	m.c.ec2.mu.Unlock()
	return out, nil
}

func (m *asgFixes) DescribeAutoScalingGroups(ctx context.Context, in *autoscaling.DescribeAutoScalingGroupsInput, optFns ...func(*autoscaling.Options)) (*autoscaling.DescribeAutoScalingGroupsOutput, error) {
	m.c.asgMu.Lock()
	defer m.c.asgMu.Unlock()
	out, err := m.AutoScalingAPI.DescribeAutoScalingGroups(ctx, in, optFns...)
	if err != nil || out == nil {
		return out, err
	}
	// Copy instance lists: the fake hands out its own slices.
	for i := range out.AutoScalingGroups {
		out.AutoScalingGroups[i].Instances = append([]autoscalingtypes.Instance(nil), out.AutoScalingGroups[i].Instances...)
	}
	return out, nil
}

func (m *asgFixes) UpdateAutoScalingGroup(ctx context.Context, in *autoscaling.UpdateAutoScalingGroupInput, optFns ...func(*autoscaling.Options)) (*autoscaling.UpdateAutoScalingGroupOutput, error) {
	m.c.asgMu.Lock()
	defer m.c.asgMu.Unlock()
	return m.AutoScalingAPI.UpdateAutoScalingGroup(ctx, in, optFns...)
}

// DescribeImages: the fake ignores ImageIds (returning every image, so an
// image lookup by id finds the wrong one); AWS honours it.
func (m *ec2Fixes) DescribeImages(ctx context.Context, in *ec2.DescribeImagesInput, optFns ...func(*ec2.Options)) (*ec2.DescribeImagesOutput, error) {
	out, err := m.EC2API.DescribeImages(ctx, in, optFns...)
	if err != nil || len(in.ImageIds) == 0 {
		return out, err
	}
	ids := map[string]bool{}
	for _, id := range in.ImageIds {
		ids[id] = true
	}
	var kept []ec2types.Image
	for _, img := range out.Images {
		if ids[aws.ToString(img.ImageId)] {
			kept = append(kept, img)
		}
	}
	out.Images = kept
	return out, nil
}

// CreateTags: the fake exits the process (klog.Fatal) on instance ids,
// which it does not track; kops tags instances before replacing them.
func (m *ec2Fixes) CreateTags(ctx context.Context, in *ec2.CreateTagsInput, optFns ...func(*ec2.Options)) (*ec2.CreateTagsOutput, error) {
	var others []string
	m.mu.Lock()
	for _, id := range in.Resources {
		inst, ok := m.instances[id]
		if !ok {
			others = append(others, id)
			continue
		}
		for _, t := range in.Tags {
			replaced := false
			for i := range inst.Tags {
				if aws.ToString(inst.Tags[i].Key) == aws.ToString(t.Key) {
					inst.Tags[i].Value, replaced = t.Value, true
				}
			}
			if !replaced {
				inst.Tags = append(inst.Tags, t)
			}
		}
	}
	m.mu.Unlock()
	if len(others) == 0 {
		return &ec2.CreateTagsOutput{}, nil
	}
	c := *in
	c.Resources = others
	return m.EC2API.CreateTags(ctx, &c, optFns...)
}

// OfflineCloud is ForDefinition as `trellis cluster`'s offline cloud
// (cluster.Options.OfflineCloud) in test builds.
func OfflineCloud(def *definition.ClusterDefinition) (fi.Cloud, error) {
	return ForDefinition(def)
}
