package rollout

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	astypes "github.com/aws/aws-sdk-go-v2/service/autoscaling/types"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/kops/pkg/client/simple"
	"k8s.io/kops/upup/pkg/fi/cloudup/awsup"
)

// AWSCloud is Cloud on AWS through kops's cloud (aws-sdk-go-v2 clients;
// kops's cloudmock in tests). Groups are kops instance groups: ASG
// "<group>.<cluster>" with a launch template; the instance group's image in
// the state store is updated with the launch template.
type AWSCloud struct {
	AWS       awsup.AWSCloud
	Cluster   string
	Clientset simple.Clientset

	asgs sync.Map // group -> its autoscaling group's name
}

// asg names the group's autoscaling group as kops does:
// "<group>.masters.<cluster>" for control-plane groups (their role is read
// from the state store once), "<group>.<cluster>" for the others.
func (c *AWSCloud) asg(ctx context.Context, group string) string {
	if n, ok := c.asgs.Load(group); ok {
		return n.(string)
	}
	name := group + "." + c.Cluster
	if c.Clientset != nil {
		cl, err := c.Clientset.GetCluster(ctx, c.Cluster)
		if err != nil {
			return name // not cached: the next call asks again
		}
		ig, err := c.Clientset.InstanceGroupsFor(cl).Get(ctx, group, metav1.GetOptions{})
		if err != nil {
			return name
		}
		if ig.IsControlPlane() {
			name = group + ".masters." + c.Cluster
		}
	}
	c.asgs.Store(group, name)
	return name
}

// ResolveImage resolves ami-..., ssm:... and owner/name the way kops does.
func (c *AWSCloud) ResolveImage(_ context.Context, image string) (string, error) {
	img, err := c.AWS.ResolveImage(image)
	if err != nil {
		return "", fmt.Errorf("failed to resolve image %q: %w", image, err)
	}
	if img == nil || img.ImageId == nil {
		return "", fmt.Errorf("image %q not found", image)
	}
	return aws.ToString(img.ImageId), nil
}

// Instances lists the group's instances with their launch-template versions.
func (c *AWSCloud) Instances(ctx context.Context, group string) ([]Instance, int, error) {
	out, err := c.AWS.Autoscaling().DescribeAutoScalingGroups(ctx, &autoscaling.DescribeAutoScalingGroupsInput{AutoScalingGroupNames: []string{c.asg(ctx, group)}})
	if err != nil {
		return nil, 0, fmt.Errorf("failed to describe %s: %w", c.asg(ctx, group), err)
	}
	if len(out.AutoScalingGroups) == 0 {
		return nil, 0, fmt.Errorf("autoscaling group %s not found", c.asg(ctx, group))
	}
	g := out.AutoScalingGroups[0]
	var insts []Instance
	for _, in := range g.Instances {
		v := ""
		if in.LaunchTemplate != nil {
			v = aws.ToString(in.LaunchTemplate.Version)
		}
		insts = append(insts, Instance{ID: aws.ToString(in.InstanceId), Version: v, InService: in.LifecycleState == astypes.LifecycleStateInService})
	}
	return insts, int(aws.ToInt32(g.DesiredCapacity)), nil
}

// launchTemplate returns the group's launch template and the version the
// group launches from (kops: "$Latest").
func (c *AWSCloud) launchTemplate(ctx context.Context, group string) (id, name, version string, err error) {
	out, err := c.AWS.Autoscaling().DescribeAutoScalingGroups(ctx, &autoscaling.DescribeAutoScalingGroupsInput{AutoScalingGroupNames: []string{c.asg(ctx, group)}})
	if err != nil || len(out.AutoScalingGroups) == 0 {
		return "", "", "", fmt.Errorf("autoscaling group %s: %w", c.asg(ctx, group), errors.Join(err, errors.New("not found")))
	}
	g := out.AutoScalingGroups[0]
	lt := g.LaunchTemplate
	if lt == nil && g.MixedInstancesPolicy != nil && g.MixedInstancesPolicy.LaunchTemplate != nil {
		lt = g.MixedInstancesPolicy.LaunchTemplate.LaunchTemplateSpecification
	}
	if lt == nil {
		return "", "", "", fmt.Errorf("autoscaling group %s has no launch template", c.asg(ctx, group))
	}
	id = aws.ToString(lt.LaunchTemplateId)
	lts, err := c.AWS.EC2().DescribeLaunchTemplates(ctx, &ec2.DescribeLaunchTemplatesInput{LaunchTemplateIds: []string{id}})
	if err != nil || len(lts.LaunchTemplates) == 0 {
		return "", "", "", fmt.Errorf("launch template %s: %w", id, errors.Join(err, errors.New("not found")))
	}
	return id, aws.ToString(lts.LaunchTemplates[0].LaunchTemplateName), aws.ToString(lt.Version), nil
}

// SetImage creates a launch-template version with the image (from the
// latest version), makes the group launch from it, and records the image in
// the instance group's spec in the state store. A group that launches from
// "$Latest" (as kops makes them) is left so: the new version is the latest,
// and kops's own plan sees no change. An empty image keeps the image and
// reports the latest version (the one a cluster upgrade's apply made).
func (c *AWSCloud) SetImage(ctx context.Context, group, imageID string) (ImageChange, error) {
	id, name, launches, err := c.launchTemplate(ctx, group)
	if err != nil {
		return ImageChange{}, err
	}
	lts, err := c.AWS.EC2().DescribeLaunchTemplates(ctx, &ec2.DescribeLaunchTemplatesInput{LaunchTemplateIds: []string{id}})
	if err != nil {
		return ImageChange{}, fmt.Errorf("failed to describe launch template %s of group %s: %w", name, group, err)
	}
	latest := aws.ToInt64(lts.LaunchTemplates[0].LatestVersionNumber)
	// The latest version and the one before it (the previous image, when
	// a run before a restart already made the latest).
	want := []string{fmt.Sprint(latest)}
	if latest > 1 {
		want = append(want, fmt.Sprint(latest-1))
	}
	vers, err := c.AWS.EC2().DescribeLaunchTemplateVersions(ctx, &ec2.DescribeLaunchTemplateVersionsInput{
		LaunchTemplateName: aws.String(name), Versions: want,
	})
	if err != nil {
		return ImageChange{}, fmt.Errorf("launch template %s versions %v: %w", name, want, err)
	}
	images := map[int64]string{}
	for _, v := range vers.LaunchTemplateVersions {
		var img string
		if v.LaunchTemplateData != nil {
			img = aws.ToString(v.LaunchTemplateData.ImageId)
		}
		images[aws.ToInt64(v.VersionNumber)] = img
	}
	cur, ok := images[latest]
	if !ok {
		return ImageChange{}, fmt.Errorf("launch template %s version %d: not found", name, latest)
	}
	ch := ImageChange{PrevVersion: fmt.Sprint(latest), NewVersion: fmt.Sprint(latest), PrevImage: cur}
	relaunch := imageID == ""
	if relaunch {
		imageID = ch.PrevImage
	}
	if ch.PrevImage != imageID {
		out, err := c.AWS.EC2().CreateLaunchTemplateVersion(ctx, &ec2.CreateLaunchTemplateVersionInput{
			LaunchTemplateId: aws.String(id), LaunchTemplateName: aws.String(name), SourceVersion: aws.String(fmt.Sprint(latest)),
			LaunchTemplateData: &ec2types.RequestLaunchTemplateData{ImageId: aws.String(imageID)},
			VersionDescription: aws.String("trellis ami rollout"),
		})
		if err != nil || out == nil || out.LaunchTemplateVersion == nil {
			return ImageChange{}, fmt.Errorf("failed to create a launch template version of %s: %w", name, errors.Join(err, errors.New("no version returned")))
		}
		ch.NewVersion = fmt.Sprint(aws.ToInt64(out.LaunchTemplateVersion.VersionNumber))
	} else {
		// Already done before a restart, or an upgrade's apply made it:
		// the previous version is the one before the latest, and so, for
		// an image rollout, is the previous image (what a rollback goes
		// back to).
		ch.PrevVersion = fmt.Sprint(latest - 1)
		if prev, ok := images[latest-1]; ok && !relaunch && prev != "" {
			ch.PrevImage = prev
		}
	}
	if launches != "$Latest" && launches != ch.NewVersion {
		if _, err := c.AWS.Autoscaling().UpdateAutoScalingGroup(ctx, &autoscaling.UpdateAutoScalingGroupInput{
			AutoScalingGroupName: aws.String(c.asg(ctx, group)),
			LaunchTemplate:       &astypes.LaunchTemplateSpecification{LaunchTemplateId: aws.String(id), Version: aws.String(ch.NewVersion)},
		}); err != nil {
			return ImageChange{}, fmt.Errorf("failed to point %s at version %s: %w", c.asg(ctx, group), ch.NewVersion, err)
		}
	}
	if c.Clientset != nil && !relaunch {
		cl, err := c.Clientset.GetCluster(ctx, c.Cluster)
		if err != nil {
			return ImageChange{}, fmt.Errorf("failed to read cluster %s from the state store: %w", c.Cluster, err)
		}
		igs := c.Clientset.InstanceGroupsFor(cl)
		ig, err := igs.Get(ctx, group, metav1.GetOptions{})
		if err != nil {
			return ImageChange{}, fmt.Errorf("instance group %s: %w", group, err)
		}
		if ig.Spec.Image != imageID {
			ig.Spec.Image = imageID
			if _, err := igs.Update(ctx, ig, metav1.UpdateOptions{}); err != nil {
				return ImageChange{}, fmt.Errorf("failed to record the image of %s in the state store: %w", group, err)
			}
		}
	}
	return ch, nil
}

// SetDesired sets the group's desired capacity, raising its maximum if needed.
func (c *AWSCloud) SetDesired(ctx context.Context, group string, n int) error {
	out, err := c.AWS.Autoscaling().DescribeAutoScalingGroups(ctx, &autoscaling.DescribeAutoScalingGroupsInput{AutoScalingGroupNames: []string{c.asg(ctx, group)}})
	if err != nil || len(out.AutoScalingGroups) == 0 {
		return fmt.Errorf("autoscaling group %s: %w", c.asg(ctx, group), errors.Join(err, errors.New("not found")))
	}
	in := &autoscaling.UpdateAutoScalingGroupInput{AutoScalingGroupName: aws.String(c.asg(ctx, group)), DesiredCapacity: aws.Int32(int32(n))}
	if int32(n) > aws.ToInt32(out.AutoScalingGroups[0].MaxSize) {
		in.MaxSize = aws.Int32(int32(n))
	}
	if _, err := c.AWS.Autoscaling().UpdateAutoScalingGroup(ctx, in); err != nil {
		return fmt.Errorf("failed to set the capacity of %s to %d: %w", c.asg(ctx, group), n, err)
	}
	return nil
}

// Terminate terminates an instance and decrements the desired capacity in
// one call; an instance already gone is done.
func (c *AWSCloud) Terminate(ctx context.Context, group, id string) error {
	return c.terminate(ctx, id, true)
}

// Replace terminates an instance and keeps the desired capacity: the group
// launches a replacement from its current launch-template version.
func (c *AWSCloud) Replace(ctx context.Context, group, id string) error {
	return c.terminate(ctx, id, false)
}

func (c *AWSCloud) terminate(ctx context.Context, id string, decrement bool) error {
	_, err := c.AWS.Autoscaling().TerminateInstanceInAutoScalingGroup(ctx, &autoscaling.TerminateInstanceInAutoScalingGroupInput{
		InstanceId: aws.String(id), ShouldDecrementDesiredCapacity: aws.Bool(decrement),
	})
	if err != nil && strings.Contains(strings.ToLower(err.Error()), "not found") {
		return nil
	}
	if err != nil {
		return fmt.Errorf("failed to terminate %s: %w", id, err)
	}
	return nil
}

// InstanceImages returns the image each instance runs (DescribeInstances).
// The ids go in as an instance-id filter, at most 200 a call (EC2's limit
// on a filter's values): with InstanceIds, one id EC2 does not know (an
// instance the group lists before EC2 shows it, or one long gone) fails
// the whole call. An instance EC2 does not return is absent from the map.
func (c *AWSCloud) InstanceImages(ctx context.Context, ids []string) (map[string]string, error) {
	out := map[string]string{}
	for chunk := range slices.Chunk(ids, 200) {
		p := ec2.NewDescribeInstancesPaginator(c.AWS.EC2(), &ec2.DescribeInstancesInput{
			Filters: []ec2types.Filter{{Name: aws.String("instance-id"), Values: chunk}},
		})
		for p.HasMorePages() {
			page, err := p.NextPage(ctx)
			if err != nil {
				return nil, fmt.Errorf("failed to describe instances %v: %w", chunk, err)
			}
			for _, r := range page.Reservations {
				for _, in := range r.Instances {
					out[aws.ToString(in.InstanceId)] = aws.ToString(in.ImageId)
				}
			}
		}
	}
	return out, nil
}
