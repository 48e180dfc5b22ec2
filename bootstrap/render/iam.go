package render

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
)

// netdPolicy is what nodes may do in EC2 for trellis-netd's AWS mode: give
// pods VPC addresses from ENIs (the calls of daemons/netd/vpc), and tag the
// ENIs it creates, only as it creates them. kops adds the like for its own
// amazonvpc networking; Trellis's networking is kops's "cni", so the
// cluster spec carries it as an additional node policy.
func netdPolicy() string {
	return policyJSON(netdStatements())
}

func netdStatements() []map[string]any {
	return []map[string]any{
		{
			"Sid":    "TrellisNetdAddresses",
			"Effect": "Allow",
			"Action": []string{
				"ec2:AssignPrivateIpAddresses", "ec2:UnassignPrivateIpAddresses",
				"ec2:CreateNetworkInterface", "ec2:AttachNetworkInterface", "ec2:DetachNetworkInterface",
				"ec2:DeleteNetworkInterface", "ec2:ModifyNetworkInterfaceAttribute",
				"ec2:DescribeNetworkInterfaces", "ec2:DescribeInstances", "ec2:DescribeInstanceTypes",
				"ec2:DescribeSubnets", "ec2:DescribeVpcs",
			},
			"Resource": "*",
		},
		{
			"Sid":       "TrellisNetdTagOnCreate",
			"Effect":    "Allow",
			"Action":    "ec2:CreateTags",
			"Resource":  "arn:aws:ec2:*:*:network-interface/*",
			"Condition": map[string]any{"StringEquals": map[string]string{"ec2:CreateAction": "CreateNetworkInterface"}},
		},
	}
}

func policyJSON(statements []map[string]any) string {
	b, err := json.MarshalIndent(statements, "", "  ")
	if err != nil {
		panic(err) // static data
	}
	return string(b)
}

// NodePolicy is the nodes' additional policy once the cluster's config
// base in the state store is known (kops's ConfigBase, e.g.
// s3://bucket/clusters/NAME): netd's, and the AMI rollout's two objects
// for trellis-gateway's console, which runs on its node's network to use
// the instance role (config/manifests/trellis-gateway). It may read them
// (the rollouts page) and write them (pause, resume and abort record a
// request in ami-rollout.json; an abort with no run holding the rollout
// also records it in ami-rollout-history.json); nothing else under the
// cluster's folder. kops already lets nodes list the state store's
// bucket, so a missing object reads as absent, not as refused. A config
// base that is not in S3 (tests' file:// and memfs://) adds nothing.
func NodePolicy(configBase, region string) (string, error) {
	statements := netdStatements()
	u, err := url.Parse(configBase)
	if err != nil {
		return "", fmt.Errorf("config base %q: %w", configBase, err)
	}
	if u.Scheme != "s3" {
		return policyJSON(statements), nil
	}
	key := strings.Trim(u.Path, "/")
	if u.Host == "" || key == "" {
		return "", fmt.Errorf("config base %q: want s3://BUCKET/PATH", configBase)
	}
	dir := fmt.Sprintf("arn:%s:s3:::%s/%s/trellis/", partition(region), u.Host, key)
	statements = append(statements, map[string]any{
		"Sid":      "TrellisConsoleRollout",
		"Effect":   "Allow",
		"Action":   []string{"s3:GetObject", "s3:PutObject"},
		"Resource": []string{dir + "ami-rollout.json", dir + "ami-rollout-history.json"},
	})
	return policyJSON(statements), nil
}

// partition is the AWS partition of region, for ARNs.
func partition(region string) string {
	switch {
	case strings.HasPrefix(region, "cn-"):
		return "aws-cn"
	case strings.HasPrefix(region, "us-gov-"):
		return "aws-us-gov"
	default:
		return "aws"
	}
}
