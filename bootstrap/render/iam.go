package render

import "encoding/json"

// netdPolicy is what nodes may do in EC2 for trellis-netd's AWS mode: give
// pods VPC addresses from ENIs (the calls of daemons/netd/vpc), and tag the
// ENIs it creates, only as it creates them. kops adds the like for its own
// amazonvpc networking; Trellis's networking is kops's "cni", so the
// cluster spec carries it as an additional node policy.
func netdPolicy() string {
	statements := []map[string]any{
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
	b, err := json.MarshalIndent(statements, "", "  ")
	if err != nil {
		panic(err) // static data
	}
	return string(b)
}
