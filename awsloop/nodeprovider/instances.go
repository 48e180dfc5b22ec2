package nodeprovider

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	corev1 "k8s.io/api/core/v1"
)

// Tags read from instances and images.
const (
	tagCluster      = "KubernetesCluster"
	tagGroup        = "kops.k8s.io/instancegroup"
	tagControlPlane = "k8s.io/role/control-plane"
	tagLabelPrefix  = "k8s.io/cluster-autoscaler/node-template/label/"
	tagTaintPrefix  = "k8s.io/cluster-autoscaler/node-template/taint/"
	// TagNodeImage on an AMI names the Docker image of its node containers.
	TagNodeImage = "trellis.dev/node-image"
	// LabelImage on a node is the AMI its instance runs.
	LabelImage = "trellis.dev/image"
	// LabelInstance is on node containers and nodes.
	LabelInstance = "trellis.dev/instance-id"
)

// EC2 is what the reconciler asks of EC2.
type EC2 interface {
	DescribeInstances(ctx context.Context, in *ec2.DescribeInstancesInput, optFns ...func(*ec2.Options)) (*ec2.DescribeInstancesOutput, error)
	DescribeImages(ctx context.Context, in *ec2.DescribeImagesInput, optFns ...func(*ec2.Options)) (*ec2.DescribeImagesOutput, error)
}

// Instance is a node instance of the cluster.
type Instance struct {
	ID, Image, Zone, Group, State string
	Labels                        map[string]string
	Taints                        []corev1.Taint
}

// running reports whether the instance should have a node.
func (i Instance) running() bool { return i.State == "pending" || i.State == "running" }

// ProviderID is the node's spec.providerID, as the AWS cloud provider sets it.
func (i Instance) ProviderID() string { return "aws:///" + i.Zone + "/" + i.ID }

// instances lists the cluster's node instances (control-plane ones are not
// nodes here: the kind control plane is).
func instances(ctx context.Context, c EC2, cluster string) (map[string]Instance, error) {
	out := map[string]Instance{}
	p := ec2.NewDescribeInstancesPaginator(c, &ec2.DescribeInstancesInput{Filters: []ec2types.Filter{{Name: aws.String("tag:" + tagCluster), Values: []string{cluster}}}})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("failed to list the instances of %s: %w", cluster, err)
		}
		for _, r := range page.Reservations {
			for _, in := range r.Instances {
				inst, ok := fromEC2(in)
				if ok {
					out[inst.ID] = inst
				}
			}
		}
	}
	return out, nil
}

func fromEC2(in ec2types.Instance) (Instance, bool) {
	inst := Instance{ID: aws.ToString(in.InstanceId), Image: aws.ToString(in.ImageId), Labels: map[string]string{}}
	if in.Placement != nil {
		inst.Zone = aws.ToString(in.Placement.AvailabilityZone)
	}
	if in.State != nil {
		inst.State = string(in.State.Name)
	}
	for _, t := range in.Tags {
		k, v := aws.ToString(t.Key), aws.ToString(t.Value)
		switch {
		case k == tagControlPlane:
			return Instance{}, false
		case k == tagGroup:
			inst.Group = v
		case strings.HasPrefix(k, tagLabelPrefix):
			inst.Labels[strings.TrimPrefix(k, tagLabelPrefix)] = v
		case strings.HasPrefix(k, tagTaintPrefix):
			value, effect, _ := strings.Cut(v, ":")
			inst.Taints = append(inst.Taints, corev1.Taint{Key: strings.TrimPrefix(k, tagTaintPrefix), Value: value, Effect: corev1.TaintEffect(effect)})
		}
	}
	sort.Slice(inst.Taints, func(a, b int) bool { return inst.Taints[a].Key < inst.Taints[b].Key })
	return inst, inst.Group != ""
}

// kubeletLabels are the labels a kubelet may set on its own node: the
// NodeRestriction admission plugin refuses most kubernetes.io and k8s.io
// ones (node-role.kubernetes.io/... are set by an admin, not here).
func kubeletLabels(inst Instance) map[string]string {
	out := map[string]string{LabelImage: inst.Image, LabelInstance: inst.ID, "trellis.dev/instance-group": inst.Group}
	for k, v := range inst.Labels {
		prefix, _, ok := strings.Cut(k, "/")
		if ok && (strings.HasSuffix(prefix, "kubernetes.io") || strings.HasSuffix(prefix, "k8s.io")) {
			continue
		}
		out[k] = v
	}
	return out
}

// nodeImage returns the Docker image an AMI names.
func nodeImage(ctx context.Context, c EC2, ami string) (string, error) {
	out, err := c.DescribeImages(ctx, &ec2.DescribeImagesInput{ImageIds: []string{ami}})
	if err != nil {
		return "", fmt.Errorf("failed to describe image %s: %w", ami, err)
	}
	for _, img := range out.Images {
		for _, t := range img.Tags {
			if aws.ToString(t.Key) == TagNodeImage {
				return aws.ToString(t.Value), nil
			}
		}
	}
	return "", fmt.Errorf("image %s has no %s tag: register node images with `trellis local aws image`", ami, TagNodeImage)
}
