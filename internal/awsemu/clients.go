package awsemu

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	ssmtypes "github.com/aws/aws-sdk-go-v2/service/ssm/types"
)

// Clients reach an emulator's services. Their methods put into it what a
// real account already has before a cluster is created: the state-store
// bucket, the machine images, the SSM parameters that name them.
type Clients struct {
	EC2 *ec2.Client
	S3  *s3.Client
	SSM *ssm.Client
	ASG *autoscaling.Client
}

// NewClients returns clients for the emulator at url, in region.
func NewClients(url, region string) *Clients {
	cfg := aws.Config{
		Region:       region,
		Credentials:  credentials.NewStaticCredentialsProvider("trellis-emulator", "trellis-emulator", ""),
		BaseEndpoint: aws.String(url),
	}
	return &Clients{
		ASG: autoscaling.NewFromConfig(cfg),
		EC2: ec2.NewFromConfig(cfg),
		S3:  s3.NewFromConfig(cfg, func(o *s3.Options) { o.UsePathStyle = true }),
		SSM: ssm.NewFromConfig(cfg),
	}
}

// Bucket creates an S3 bucket (an existing one is fine).
func (s *Clients) Bucket(ctx context.Context, name string) error {
	in := &s3.CreateBucketInput{Bucket: aws.String(name)}
	if r := s.S3.Options().Region; r != "us-east-1" {
		in.CreateBucketConfiguration = &s3types.CreateBucketConfiguration{LocationConstraint: s3types.BucketLocationConstraint(r)}
	}
	_, err := s.S3.CreateBucket(ctx, in)
	var owned *s3types.BucketAlreadyOwnedByYou
	if err != nil && !errors.As(err, &owned) {
		return fmt.Errorf("failed to create bucket %s: %w", name, err)
	}
	return nil
}

// Image registers a machine image and returns its id. arch is x86_64 or
// arm64.
func (s *Clients) Image(ctx context.Context, name, arch string) (string, error) {
	out, err := s.EC2.RegisterImage(ctx, &ec2.RegisterImageInput{
		Name:               aws.String(name),
		Architecture:       ec2types.ArchitectureValues(arch),
		RootDeviceName:     aws.String("/dev/sda1"),
		VirtualizationType: aws.String("hvm"),
	})
	if err != nil {
		return "", fmt.Errorf("failed to register image %s: %w", name, err)
	}
	return aws.ToString(out.ImageId), nil
}

// Parameter sets an SSM string parameter (kops resolves `image: ssm:NAME`).
func (s *Clients) Parameter(ctx context.Context, name, value string) error {
	_, err := s.SSM.PutParameter(ctx, &ssm.PutParameterInput{
		Name: aws.String(name), Value: aws.String(value), Type: ssmtypes.ParameterTypeString, Overwrite: aws.Bool(true),
	})
	if err != nil {
		return fmt.Errorf("failed to set SSM parameter %s: %w", name, err)
	}
	return nil
}

// GroupImages returns the image of every instance of an autoscaling group,
// by instance id.
func (s *Clients) GroupImages(ctx context.Context, asg string) (map[string]string, error) {
	out, err := s.ASG.DescribeAutoScalingGroups(ctx, &autoscaling.DescribeAutoScalingGroupsInput{AutoScalingGroupNames: []string{asg}})
	if err != nil {
		return nil, fmt.Errorf("failed to describe %s: %w", asg, err)
	}
	var ids []string
	for _, g := range out.AutoScalingGroups {
		for _, in := range g.Instances {
			ids = append(ids, aws.ToString(in.InstanceId))
		}
	}
	m := map[string]string{}
	if len(ids) == 0 {
		return m, nil
	}
	insts, err := s.EC2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: ids})
	if err != nil {
		return nil, fmt.Errorf("failed to describe the instances of %s: %w", asg, err)
	}
	for _, r := range insts.Reservations {
		for _, in := range r.Instances {
			m[aws.ToString(in.InstanceId)] = aws.ToString(in.ImageId)
		}
	}
	return m, nil
}
