package awsemu_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"

	"github.com/trellis-dev/trellis/internal/awsemu"
	"github.com/trellis-dev/trellis/internal/awsemu/awsemutest"
)

// Fix 14: moto_server answers requests on many threads over shared
// dicts, so a DeleteSubnet (fix 11 walks every route table) racing a
// DeleteRouteTable failed half-way with "dictionary changed size during
// iteration": the subnet was gone but its route-table association stayed,
// and `cluster delete` waited on that route table forever (make
// test-loaded, test/aws, on a loaded machine). The emulator now answers
// one request at a time. A tiny thread switch interval makes the race
// show at once; each round deletes subnets and other route tables at the
// same time, then every route table of a deleted subnet must delete.
func TestIntegrationConcurrentDeletesKeepRouteTablesDeletable(t *testing.T) {
	s := awsemutest.StartWith(t, awsemu.Options{Env: []string{"TRELLIS_MOTO_SWITCH_INTERVAL=0.000001"}})
	c := awsemu.NewClients(s.URL, "us-east-1")
	ctx := context.Background()
	const rounds, n = 3, 24
	deleted := 0
	for round := range rounds {
		v, err := c.EC2.CreateVpc(ctx, &ec2.CreateVpcInput{CidrBlock: aws.String(fmt.Sprintf("10.%d.0.0/16", 10+round))})
		if err != nil {
			t.Fatal(err)
		}
		var subnets, owned, others []string
		for i := range n {
			sub, err := c.EC2.CreateSubnet(ctx, &ec2.CreateSubnetInput{VpcId: v.Vpc.VpcId, CidrBlock: aws.String(fmt.Sprintf("10.%d.%d.0/24", 10+round, i))})
			if err != nil {
				t.Fatal(err)
			}
			rt, err := c.EC2.CreateRouteTable(ctx, &ec2.CreateRouteTableInput{VpcId: v.Vpc.VpcId})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := c.EC2.AssociateRouteTable(ctx, &ec2.AssociateRouteTableInput{RouteTableId: rt.RouteTable.RouteTableId, SubnetId: sub.Subnet.SubnetId}); err != nil {
				t.Fatal(err)
			}
			other, err := c.EC2.CreateRouteTable(ctx, &ec2.CreateRouteTableInput{VpcId: v.Vpc.VpcId})
			if err != nil {
				t.Fatal(err)
			}
			subnets = append(subnets, *sub.Subnet.SubnetId)
			owned = append(owned, *rt.RouteTable.RouteTableId)
			others = append(others, *other.RouteTable.RouteTableId)
		}
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() { _, _ = c.EC2.DeleteSubnet(ctx, &ec2.DeleteSubnetInput{SubnetId: aws.String(subnets[i])}) })
			wg.Go(func() {
				_, _ = c.EC2.DeleteRouteTable(ctx, &ec2.DeleteRouteTableInput{RouteTableId: aws.String(others[i])})
			})
		}
		wg.Wait()
		for i, id := range owned {
			if _, err := c.EC2.DeleteRouteTable(ctx, &ec2.DeleteRouteTableInput{RouteTableId: aws.String(id)}); err != nil {
				t.Errorf("round %d: route table %s of deleted subnet %s: %v, want it deletable", round, id, subnets[i], err)
				continue
			}
			deleted++
		}
	}
	if want := rounds * n; deleted != want {
		t.Errorf("deleted %d route tables of deleted subnets, want %d", deleted, want)
	}
	log, err := os.ReadFile(s.LogFile)
	if err != nil {
		t.Fatal(err)
	}
	// A failed request's traceback ends in its exception's line.
	var failed []string
	for l := range strings.Lines(string(log)) {
		if strings.Contains(l, "Error: ") && !strings.HasPrefix(l, " ") {
			failed = append(failed, strings.TrimSpace(l))
		}
	}
	if len(failed) > 0 {
		t.Errorf("the emulator failed %d requests: %s", len(failed), strings.Join(failed, "; "))
	}
}
