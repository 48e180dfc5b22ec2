package aws

import (
	"context"
	"slices"
	"strings"
	"testing"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/trellis-dev/trellis/internal/awsemu"
	"github.com/trellis-dev/trellis/internal/awsemu/awsemutest"
)

// platformGroups adds to local-aws what a platform team defines: IMDSv2 and
// encrypted gp3 for every group, a spot pool of mixed instances, and an
// arm64 pool with its own image and a warm pool.
func platformGroups(s string) string {
	s = strings.Replace(s, "instanceGroups:\n", `instanceDefaults:
  instanceMetadata: {httpTokens: required, hopLimit: 1}
  rootVolume: {type: gp3, size: 64, encrypted: true}
instanceGroups:
- name: spot
  machineType: m6i.large
  image: ssm:/trellis/local-aws/images/node
  minSize: 1
  maxSize: 4
  zones: [us-east-1a, us-east-1b]
  mixedInstances:
    instances: [m6i.large, m6a.large, m5.large]
    onDemandBase: 0
    onDemandAboveBase: 0
    spotAllocationStrategy: price-capacity-optimized
    capacityRebalance: true
  maxInstanceLifetime: 168h
- name: arm
  architecture: arm64
  machineType: m7g.large
  image: ssm:/trellis/local-aws/images/node-arm64
  minSize: 1
  maxSize: 3
  zones: [us-east-1a]
  rootVolume: {size: 100, iops: 4000, throughput: 250}
  warmPool: {minSize: 1, maxSize: 2}
`, 1)
	return s
}

// TestIntegrationInstanceGroups creates a cluster whose groups use the
// instance settings and checks what the emulator holds, and that kops
// refuses an x86 image for the arm64 pool with the state store untouched.
func TestIntegrationInstanceGroups(t *testing.T) {
	ctx := context.Background()
	emu := awsemutest.Start(t)
	c := awsemu.NewClients(emu.URL, "us-east-1")
	x86 := seedAccount(t, c)
	arm, err := c.Image(ctx, "trellis-node-arm64", "arm64")
	if err != nil {
		t.Fatal(err)
	}
	def := definition(t, platformGroups)
	env := []string{"TRELLIS_AWS_EMULATOR=" + emu.URL, "KOPS_STATE_STORE=" + state}
	trellis := func(args ...string) result { return run(t, env, trellisBin, args...) }

	t.Run("an x86 image for the arm64 pool is refused and nothing is stored", func(t *testing.T) {
		if err := c.Parameter(ctx, imageParam+"-arm64", x86); err != nil {
			t.Fatal(err)
		}
		keepsStore(t, c, "the refused create", func() {
			r := trellis("cluster", "create", "-f", def, "--yes", "--task-timeout", "3s")
			if r.code == 0 || !strings.Contains(r.stderr, "arm64") || !strings.Contains(r.stderr, "x86_64") {
				t.Fatalf("create with an x86 image for an arm64 pool: %s", r)
			}
		})
	})

	t.Run("create makes the groups as defined", func(t *testing.T) {
		if err := c.Parameter(ctx, imageParam+"-arm64", arm); err != nil {
			t.Fatal(err)
		}
		if r := trellis("cluster", "create", "-f", def, "--yes"); r.code != 0 {
			t.Fatalf("create --yes: %s", r)
		}
		for _, g := range []string{"spot", "arm", "general", "batch", "control-plane-us-east-1a.masters"} {
			lt := launchTemplate(t, c, g+"."+clusterName)
			md := lt.MetadataOptions
			if md == nil || md.HttpTokens != "required" || awssdk.ToInt32(md.HttpPutResponseHopLimit) != 1 {
				t.Errorf("%s: metadata options %+v, want IMDSv2 required with hop limit 1", g, md)
			}
			if len(lt.BlockDeviceMappings) == 0 || lt.BlockDeviceMappings[0].Ebs == nil {
				t.Errorf("%s: no root volume in the launch template", g)
				continue
			}
			ebs := lt.BlockDeviceMappings[0].Ebs
			size, iops := int32(64), int32(3000)
			if g == "arm" {
				size, iops = 100, 4000
			}
			if ebs.VolumeType != "gp3" || awssdk.ToInt32(ebs.VolumeSize) != size || !awssdk.ToBool(ebs.Encrypted) || awssdk.ToInt32(ebs.Iops) != iops {
				t.Errorf("%s: root volume %s %d GiB encrypted %v iops %d; want gp3 %d GiB encrypted, iops %d", g, ebs.VolumeType, awssdk.ToInt32(ebs.VolumeSize), awssdk.ToBool(ebs.Encrypted), awssdk.ToInt32(ebs.Iops), size, iops)
			}
			if g == "arm" && awssdk.ToString(lt.ImageId) != arm {
				t.Errorf("arm: image %s, want the arm64 image %s", awssdk.ToString(lt.ImageId), arm)
			}
		}
		asgs, err := c.ASG.DescribeAutoScalingGroups(ctx, &autoscaling.DescribeAutoScalingGroupsInput{AutoScalingGroupNames: []string{"spot." + clusterName}})
		if err != nil || len(asgs.AutoScalingGroups) != 1 {
			t.Fatalf("spot group: %v", err)
		}
		spot := asgs.AutoScalingGroups[0]
		mip := spot.MixedInstancesPolicy
		if mip == nil || mip.InstancesDistribution == nil || len(mip.LaunchTemplate.Overrides) != 3 ||
			awssdk.ToString(mip.InstancesDistribution.SpotAllocationStrategy) != "price-capacity-optimized" ||
			awssdk.ToInt32(mip.InstancesDistribution.OnDemandPercentageAboveBaseCapacity) != 0 {
			t.Errorf("spot group's mixed instances policy: %+v", mip)
		}
		if !awssdk.ToBool(spot.CapacityRebalance) || awssdk.ToInt32(spot.MaxInstanceLifetime) != 168*3600 {
			t.Errorf("spot group: capacity rebalance %v, max instance lifetime %d; want true, 604800", awssdk.ToBool(spot.CapacityRebalance), awssdk.ToInt32(spot.MaxInstanceLifetime))
		}
		wp, err := c.ASG.DescribeWarmPool(ctx, &autoscaling.DescribeWarmPoolInput{AutoScalingGroupName: awssdk.String("arm." + clusterName)})
		if err != nil || wp.WarmPoolConfiguration == nil || awssdk.ToInt32(wp.WarmPoolConfiguration.MinSize) != 1 || awssdk.ToInt32(wp.WarmPoolConfiguration.MaxGroupPreparedCapacity) != 2 {
			t.Errorf("arm group's warm pool: %+v, %v; want min 1, max 2", wp, err)
		}
	})

	t.Run("diff and the kops CLI read it all back", func(t *testing.T) {
		// kops's own autoscaling-group task never reads CapacityRebalance or
		// the warm pool back: the two changes it always plans (on AWS too).
		kopsOwn := func(out string) string {
			var rest []string
			for _, l := range strings.Split(out, "\n") {
				f := strings.Fields(l)
				if len(f) > 0 && (f[0] == "CapacityRebalance" || f[0] == "WarmPool") {
					continue
				}
				if len(f) == 1 && strings.HasPrefix(f[0], "AutoscalingGroup/") {
					continue
				}
				rest = append(rest, l)
			}
			return strings.Join(rest, "\n")
		}
		r := trellis("cluster", "diff", "-f", def)
		if r.code != 0 || !strings.Contains(r.out, "Spec: no changes.") || strings.Count(r.out, "AutoscalingGroup/") != 2 || strings.Contains(kopsOwn(r.out), "\u0009") {
			t.Errorf("diff after create: %s; want only kops's own CapacityRebalance and WarmPool changes", r)
		}
		r = run(t, kopsEnv(emu.URL), kopsBinary(t), "get", "instancegroups", "--name", clusterName, "--state", state, "-o", "yaml")
		for _, want := range []string{"httpTokens: required", "httpPutResponseHopLimit: 1", "rootVolumeType: gp3", "rootVolumeEncryption: true",
			"spotAllocationStrategy: price-capacity-optimized", "- m6a.large", "capacityRebalance: true", "maxInstanceLifetime: 168h0m0s", "warmPool:", "machineType: m7g.large"} {
			if !strings.Contains(r.out, want) {
				t.Errorf("kops get instancegroups lacks %q:\n%s", want, r)
			}
		}
		if r := run(t, kopsEnv(emu.URL), kopsBinary(t), "update", "cluster", "--name", clusterName, "--state", state); r.code != 0 || strings.Count(r.out, "AutoscalingGroup/") != 2 || strings.Contains(kopsOwn(r.out), "\u0009") {
			t.Errorf("kops update cluster: %s; want only its own CapacityRebalance and WarmPool changes", r)
		}
	})

	t.Run("a changed mix or root volume is a diff, and update rolls just those groups", func(t *testing.T) {
		next := definition(t, changed)
		r := trellis("cluster", "diff", "-f", next)
		if r.code != 0 || !strings.Contains(r.out, "instancegroup/general") || !strings.Contains(r.out, "rootVolume") || !strings.Contains(r.out, "instancegroup/spot") || !strings.Contains(r.out, "mixedInstancesPolicy") {
			t.Fatalf("diff of the changed definition: %s", r)
		}
		before := groupInstances(t, c)
		if r := trellis("cluster", "update", "-f", next, "--yes", "--gate-timeout", "2m"); r.code != 0 || !strings.Contains(r.out, "Applied "+clusterName) {
			t.Fatalf("cluster update --yes: %s", r)
		}
		after := groupInstances(t, c)
		for g, ids := range before {
			rolled := g == "spot."+clusterName || g == "general."+clusterName
			for _, id := range ids {
				if kept := slices.Contains(after[g], id); kept == rolled {
					t.Errorf("%s: instance %s kept %v; want the changed groups (spot, general) rolled and no other", g, id, kept)
				}
			}
			if len(after[g]) != len(ids) {
				t.Errorf("%s: %d instances after the update, %d before", g, len(after[g]), len(ids))
			}
		}
		if lt := launchTemplate(t, c, "general."+clusterName); awssdk.ToInt32(lt.BlockDeviceMappings[0].Ebs.VolumeSize) != 80 {
			t.Errorf("general's root volume after the update: %d GiB, want 80", awssdk.ToInt32(lt.BlockDeviceMappings[0].Ebs.VolumeSize))
		}
		if st := rolloutState(t, trellis, next); st.Status != "Done" || st.Reason != "definition change" {
			t.Errorf("the update's roll: %s %q", st.Status, st.Reason)
		}
		// An AMI rollout of the arm64 pool takes only an arm64 image.
		lts := func() int {
			out, err := c.EC2.DescribeLaunchTemplateVersions(ctx, &ec2.DescribeLaunchTemplateVersionsInput{LaunchTemplateName: awssdk.String("arm." + clusterName)})
			if err != nil {
				t.Fatal(err)
			}
			return len(out.LaunchTemplateVersions)
		}
		n := lts()
		if r := trellis("ami", "rollout", "-f", next, "--groups", "arm", "--image", x86, "--yes", "--cloud-only"); r.code == 0 || !strings.Contains(r.stderr, "image architecture does not match") || lts() != n {
			t.Errorf("rollout of the arm64 pool onto an x86 image: %s (launch-template versions %d -> %d); want it refused before anything changes", r, n, lts())
		}
		if r := trellis("ami", "rollout", "-f", next, "--groups", "arm", "--image", arm); r.code != 0 || !strings.Contains(r.out, "Nothing changed") {
			t.Errorf("plan of the arm64 pool onto its arm64 image: %s", r)
		}
		versioned := definition(t, func(s string) string {
			return strings.Replace(changed(s), "kubernetesVersion: 1.36.1", "kubernetesVersion: 1.35.5", 1)
		})
		if r := trellis("cluster", "update", "-f", versioned, "--yes"); r.code == 0 || !strings.Contains(r.stderr, "trellis cluster upgrade --to") {
			t.Errorf("update with another kubernetesVersion: %s; want it refused", r)
		}
	})
}

// changed is platformGroups with two changes of the groups' instances: the
// spot group's mix loses a type and general's root volume grows.
func changed(s string) string {
	s = platformGroups(s)
	s = strings.Replace(s, "instances: [m6i.large, m6a.large, m5.large]", "instances: [m6i.large, m6a.large]", 1)
	return strings.Replace(s, "  labels: {trellis.dev/pool: general}\n", "  labels: {trellis.dev/pool: general}\n  rootVolume: {size: 80}\n", 1)
}

// launchTemplate is the newest version's data of a group's launch template.
func launchTemplate(t *testing.T, c *awsemu.Clients, asg string) *ec2types.ResponseLaunchTemplateData {
	t.Helper()
	ctx := context.Background()
	out, err := c.ASG.DescribeAutoScalingGroups(ctx, &autoscaling.DescribeAutoScalingGroupsInput{AutoScalingGroupNames: []string{asg}})
	if err != nil || len(out.AutoScalingGroups) != 1 {
		t.Fatalf("group %s: %v", asg, err)
	}
	g := out.AutoScalingGroups[0]
	spec := g.LaunchTemplate
	if spec == nil && g.MixedInstancesPolicy != nil {
		spec = g.MixedInstancesPolicy.LaunchTemplate.LaunchTemplateSpecification
	}
	if spec == nil {
		t.Fatalf("group %s has no launch template", asg)
	}
	vers, err := c.EC2.DescribeLaunchTemplateVersions(ctx, &ec2.DescribeLaunchTemplateVersionsInput{LaunchTemplateId: spec.LaunchTemplateId, Versions: []string{"$Latest"}})
	if err != nil || len(vers.LaunchTemplateVersions) != 1 {
		t.Fatalf("launch template of %s: %v", asg, err)
	}
	return vers.LaunchTemplateVersions[0].LaunchTemplateData
}
