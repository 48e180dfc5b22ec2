// Package vpc is netd's AWS mode: pods take VPC addresses, secondary
// private IPv4 addresses of the node's ENIs, the way the AWS VPC CNI's
// ipamd hands them out. The pool keeps a few free addresses warm so a pod
// does not wait on EC2, attaches another ENI when the attached ones are
// full, stays within the instance type's ENI and address limits, gives
// back what it no longer needs, and records which pod holds which address
// in a checkpoint on the node, so a restart neither reallocates nor leaks.
package vpc

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/smithy-go"
	"golang.org/x/time/rate"
	"k8s.io/utils/clock"
)

// EC2 is the part of the EC2 API the pool calls (*ec2.Client has it).
type EC2 interface {
	DescribeInstances(context.Context, *ec2.DescribeInstancesInput, ...func(*ec2.Options)) (*ec2.DescribeInstancesOutput, error)
	DescribeInstanceTypes(context.Context, *ec2.DescribeInstanceTypesInput, ...func(*ec2.Options)) (*ec2.DescribeInstanceTypesOutput, error)
	DescribeNetworkInterfaces(context.Context, *ec2.DescribeNetworkInterfacesInput, ...func(*ec2.Options)) (*ec2.DescribeNetworkInterfacesOutput, error)
	DescribeSubnets(context.Context, *ec2.DescribeSubnetsInput, ...func(*ec2.Options)) (*ec2.DescribeSubnetsOutput, error)
	DescribeVpcs(context.Context, *ec2.DescribeVpcsInput, ...func(*ec2.Options)) (*ec2.DescribeVpcsOutput, error)
	AssignPrivateIpAddresses(context.Context, *ec2.AssignPrivateIpAddressesInput, ...func(*ec2.Options)) (*ec2.AssignPrivateIpAddressesOutput, error)
	UnassignPrivateIpAddresses(context.Context, *ec2.UnassignPrivateIpAddressesInput, ...func(*ec2.Options)) (*ec2.UnassignPrivateIpAddressesOutput, error)
	CreateNetworkInterface(context.Context, *ec2.CreateNetworkInterfaceInput, ...func(*ec2.Options)) (*ec2.CreateNetworkInterfaceOutput, error)
	AttachNetworkInterface(context.Context, *ec2.AttachNetworkInterfaceInput, ...func(*ec2.Options)) (*ec2.AttachNetworkInterfaceOutput, error)
	ModifyNetworkInterfaceAttribute(context.Context, *ec2.ModifyNetworkInterfaceAttributeInput, ...func(*ec2.Options)) (*ec2.ModifyNetworkInterfaceAttributeOutput, error)
	DetachNetworkInterface(context.Context, *ec2.DetachNetworkInterfaceInput, ...func(*ec2.Options)) (*ec2.DetachNetworkInterfaceOutput, error)
	DeleteNetworkInterface(context.Context, *ec2.DeleteNetworkInterfaceInput, ...func(*ec2.Options)) (*ec2.DeleteNetworkInterfaceOutput, error)
}

// Discipline is how the pool treats EC2: a token bucket for every call,
// and throttled calls retried after a jittered exponential backoff.
type Discipline struct {
	// Rate and Burst of the token bucket (default 10/s, burst 20; EC2's
	// own mutating-call bucket refills at 5/s per account).
	Rate  rate.Limit
	Burst int
	// Attempts per call when throttled (default 8); Backoff the first wait
	// (default 200ms), doubled each time up to MaxBackoff (default 10s),
	// each wait a random time between half and all of it.
	Attempts   int
	Backoff    time.Duration
	MaxBackoff time.Duration
}

func (d *Discipline) defaults() {
	if d.Rate == 0 {
		d.Rate = 10
	}
	if d.Burst == 0 {
		d.Burst = 20
	}
	if d.Attempts == 0 {
		d.Attempts = 8
	}
	if d.Backoff == 0 {
		d.Backoff = 200 * time.Millisecond
	}
	if d.MaxBackoff == 0 {
		d.MaxBackoff = 10 * time.Second
	}
}

// caller makes EC2 calls under a Discipline and counts them.
type caller struct {
	d       Discipline
	limiter *rate.Limiter
	clock   clock.Clock
	metrics *Metrics
}

func newCaller(d Discipline, c clock.Clock, m *Metrics) *caller {
	d.defaults()
	return &caller{d: d, limiter: rate.NewLimiter(d.Rate, d.Burst), clock: c, metrics: m}
}

// throttled reports whether err is EC2 asking the caller to slow down.
func throttled(err error) bool {
	var ae smithy.APIError
	if !errors.As(err, &ae) {
		return false
	}
	switch ae.ErrorCode() {
	case "RequestLimitExceeded", "Throttling", "ThrottlingException", "RequestThrottled", "EC2ThrottledException":
		return true
	}
	return false
}

// call runs fn, named action, within the discipline.
func call[T any](ctx context.Context, c *caller, action string, fn func(context.Context) (T, error)) (T, error) {
	var zero T
	wait := c.d.Backoff
	for attempt := 1; ; attempt++ {
		if err := c.limiter.Wait(ctx); err != nil {
			return zero, fmt.Errorf("%s: %w", action, err)
		}
		out, err := fn(ctx)
		c.metrics.call(action, err, throttled(err))
		if err == nil {
			return out, nil
		}
		if !throttled(err) || attempt >= c.d.Attempts {
			return zero, fmt.Errorf("%s: %w", action, err)
		}
		sleep := wait/2 + rand.N(wait/2+1)
		select {
		case <-ctx.Done():
			return zero, fmt.Errorf("%s: %w (throttled, then %w)", action, err, ctx.Err())
		case <-c.clock.After(sleep):
		}
		wait = min(2*wait, c.d.MaxBackoff)
	}
}

// NewClient returns the EC2 client a pool calls through: the SDK's own
// retries are off, because the pool's Discipline owns them (and counts
// them).
func NewClient(cfg aws.Config) *ec2.Client {
	return ec2.NewFromConfig(cfg, func(o *ec2.Options) { o.Retryer = aws.NopRetryer{} })
}
