package bootstrap

import (
	"context"
	"errors"
	"fmt"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/smithy-go"
	"k8s.io/kops/upup/pkg/fi"
	"k8s.io/kops/upup/pkg/fi/cloudup/awsup"
	"k8s.io/kops/util/pkg/awsinterfaces"
)

// codedCloud is kops's AWS cloud with the error code put back into the
// errors kops reports by message alone (awsup.AWSErrorMessage). Its
// autoscaling-group task fails with "error creating AutoScalingGroup:
// <message>", its route task with "error creating Route: <message>": an
// error without a message (an HTTP 500 whose body the SDK cannot read)
// ended an apply with an empty reason and no code. Every other kops task
// formats the SDK's whole error, which holds the code and status already.
type codedCloud struct {
	awsup.AWSCloud
}

// withCodes wraps an AWS cloud; any other cloud is returned as it is.
func withCodes(c fi.Cloud) fi.Cloud {
	if a, ok := c.(awsup.AWSCloud); ok {
		if _, done := c.(codedCloud); !done {
			return codedCloud{a}
		}
	}
	return c
}

func (c codedCloud) Autoscaling() awsinterfaces.AutoScalingAPI {
	return codedASG{c.AWSCloud.Autoscaling()}
}

func (c codedCloud) EC2() awsinterfaces.EC2API {
	return codedEC2{c.AWSCloud.EC2()}
}

type codedEC2 struct {
	awsinterfaces.EC2API
}

func (e codedEC2) CreateRoute(ctx context.Context, in *ec2.CreateRouteInput, opts ...func(*ec2.Options)) (*ec2.CreateRouteOutput, error) {
	out, err := e.EC2API.CreateRoute(ctx, in, opts...)
	return out, coded(err)
}

func (e codedEC2) ReplaceRoute(ctx context.Context, in *ec2.ReplaceRouteInput, opts ...func(*ec2.Options)) (*ec2.ReplaceRouteOutput, error) {
	out, err := e.EC2API.ReplaceRoute(ctx, in, opts...)
	return out, coded(err)
}

type codedASG struct {
	awsinterfaces.AutoScalingAPI
}

func (a codedASG) CreateAutoScalingGroup(ctx context.Context, in *autoscaling.CreateAutoScalingGroupInput, opts ...func(*autoscaling.Options)) (*autoscaling.CreateAutoScalingGroupOutput, error) {
	out, err := a.AutoScalingAPI.CreateAutoScalingGroup(ctx, in, opts...)
	return out, coded(err)
}

// coded returns err as an API error whose message starts with the cloud's
// error code and the HTTP status, so a caller that keeps only the message
// still says what the cloud answered. The code itself is kept, so kops's
// checks of it work as before.
func coded(err error) error {
	if err == nil {
		return nil
	}
	var api smithy.APIError
	code, msg := "", ""
	if errors.As(err, &api) {
		code, msg = api.ErrorCode(), api.ErrorMessage()
	}
	status := ""
	var re *awshttp.ResponseError
	if errors.As(err, &re) {
		status = fmt.Sprintf("HTTP %d", re.HTTPStatusCode())
	}
	if code == "" {
		code = "no error code"
	}
	if msg == "" {
		msg = "the cloud gave no message: " + err.Error()
	}
	if status != "" {
		code += ", " + status
	}
	return &smithy.GenericAPIError{Code: codeOf(api), Message: fmt.Sprintf("%s (%s)", msg, code), Fault: faultOf(api)}
}

func codeOf(api smithy.APIError) string {
	if api == nil {
		return ""
	}
	return api.ErrorCode()
}

func faultOf(api smithy.APIError) smithy.ErrorFault {
	if api == nil {
		return smithy.FaultUnknown
	}
	return api.ErrorFault()
}
