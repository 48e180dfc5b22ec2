package vpc

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/trellis-dev/trellis/internal/enilimits"
)

// Limits are an instance type's network limits (the same type the
// renderer reads from its offline table; netd asks EC2).
type Limits = enilimits.Limits

// lookupLimits asks EC2 for an instance type's limits.
func lookupLimits(ctx context.Context, c *caller, api EC2, instanceType string) (Limits, error) {
	out, err := call(ctx, c, "DescribeInstanceTypes", func(ctx context.Context) (*ec2.DescribeInstanceTypesOutput, error) {
		return api.DescribeInstanceTypes(ctx, &ec2.DescribeInstanceTypesInput{InstanceTypes: []ec2types.InstanceType{ec2types.InstanceType(instanceType)}})
	})
	if err != nil {
		return Limits{}, fmt.Errorf("failed to describe instance type %s: %w", instanceType, err)
	}
	if len(out.InstanceTypes) != 1 || out.InstanceTypes[0].NetworkInfo == nil {
		return Limits{}, fmt.Errorf("instance type %s: EC2 knows no network limits for it", instanceType)
	}
	ni := out.InstanceTypes[0].NetworkInfo
	l := Limits{ENIs: int(aws.ToInt32(ni.MaximumNetworkInterfaces)), AddressesPerENI: int(aws.ToInt32(ni.Ipv4AddressesPerInterface))}
	if l.ENIs < 1 || l.AddressesPerENI < 2 {
		return Limits{}, fmt.Errorf("instance type %s: %s leaves no address for a pod", instanceType, l)
	}
	return l, nil
}
