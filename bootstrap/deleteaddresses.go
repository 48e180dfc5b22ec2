package bootstrap

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"k8s.io/kops/pkg/resources"
	awsresources "k8s.io/kops/pkg/resources/aws"
	"k8s.io/kops/upup/pkg/fi"
	"k8s.io/kops/upup/pkg/fi/cloudup/awsup"
)

// addOwnedAddresses adds to all the Elastic IPs tagged as owned by the
// cluster that kops's listing missed. kops finds a NAT gateway's address
// only through the gateway, and the gateway only through a route table's
// routes, so an address whose gateway and route table are gone (a delete
// that stopped after them) would be left in the cloud, unseen by every
// later delete. kops tags the addresses it makes for NAT gateways with the
// cluster's ownership tag; that is what is read here.
func addOwnedAddresses(ctx context.Context, cloud fi.Cloud, cluster string, all map[string]*resources.Resource) error {
	c, ok := cloud.(awsup.AWSCloud)
	if !ok {
		return nil
	}
	// No tag filter: kops's EC2 mock knows none, and a region's addresses
	// are few.
	resp, err := c.EC2().DescribeAddresses(ctx, &ec2.DescribeAddressesInput{})
	if err != nil {
		return fmt.Errorf("failed to list the Elastic IPs owned by %s: %w", cluster, err)
	}
	owner := "kubernetes.io/cluster/" + cluster
	for _, a := range resp.Addresses {
		id := aws.ToString(a.AllocationId)
		k := awsresources.TypeElasticIp + ":" + id
		if id == "" || all[k] != nil {
			continue
		}
		for _, t := range a.Tags {
			if aws.ToString(t.Key) == owner && aws.ToString(t.Value) == "owned" {
				all[k] = &resources.Resource{Name: aws.ToString(a.PublicIp), ID: id, Type: awsresources.TypeElasticIp, Obj: a, Deleter: awsresources.DeleteElasticIP}
				break
			}
		}
	}
	return nil
}
