// Command gen writes enilimits' table from DescribeInstanceTypes, asked of
// the AWS API emulator it starts (or of -endpoint).
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"

	"github.com/trellis-dev/trellis/internal/awsemu"
)

func main() {
	out := flag.String("o", "limits.tsv", "the table to write")
	endpoint := flag.String("endpoint", "", "EC2 endpoint (default: start the AWS API emulator)")
	flag.Parse()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if *endpoint == "" {
		s, err := awsemu.Start(ctx, awsemu.Options{})
		if err != nil {
			log.Fatal(err)
		}
		defer s.Stop()
		*endpoint = s.URL
	}
	c := awsemu.NewClients(*endpoint, "us-east-1").EC2
	var rows []string
	p := ec2.NewDescribeInstanceTypesPaginator(c, &ec2.DescribeInstanceTypesInput{})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			log.Fatal(err)
		}
		for _, t := range page.InstanceTypes {
			if t.NetworkInfo == nil || t.VCpuInfo == nil || t.MemoryInfo == nil || t.ProcessorInfo == nil {
				continue
			}
			archs := make([]string, 0, len(t.ProcessorInfo.SupportedArchitectures))
			for _, a := range t.ProcessorInfo.SupportedArchitectures {
				archs = append(archs, string(a))
			}
			rows = append(rows, fmt.Sprintf("%s\t%d\t%d\t%d\t%d\t%s", t.InstanceType, aws.ToInt32(t.NetworkInfo.MaximumNetworkInterfaces),
				aws.ToInt32(t.NetworkInfo.Ipv4AddressesPerInterface), aws.ToInt32(t.VCpuInfo.DefaultVCpus), aws.ToInt64(t.MemoryInfo.SizeInMiB), strings.Join(archs, ",")))
		}
	}
	slices.Sort(rows)
	body := "type\tenis\taddressesPerENI\tvcpus\tmemoryMiB\tarchitectures\n" + strings.Join(rows, "\n") + "\n"
	if err := os.WriteFile(*out, []byte(body), 0o644); err != nil {
		log.Fatal(err)
	}
	log.Printf("wrote %d instance types to %s", len(rows), *out)
}
