package nodeprovider

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

// MarkerFile in a node image names the AMI build it is, so a rollout
// visibly changes what nodes run.
const MarkerFile = "/etc/trellis/node-image"

// nodeImageRepo holds the node images RegisterNodeImage builds.
const nodeImageRepo = "trellis.local/aws-node"

// ImageRegistry is what registering a node image asks of EC2.
type ImageRegistry interface {
	RegisterImage(ctx context.Context, in *ec2.RegisterImageInput, optFns ...func(*ec2.Options)) (*ec2.RegisterImageOutput, error)
	CreateTags(ctx context.Context, in *ec2.CreateTagsInput, optFns ...func(*ec2.Options)) (*ec2.CreateTagsOutput, error)
}

// RegisterNodeImage builds a node image from base with a marker file
// holding name (docker build, offline: base is local), registers an AMI
// named name (x86_64) and tags it with the image. It returns the AMI id.
func RegisterNodeImage(ctx context.Context, c ImageRegistry, base, name string) (ami, image string, err error) {
	if strings.ContainsAny(name, " \t\n'\"$`\\") || name == "" {
		return "", "", fmt.Errorf("node image name %q: use letters, digits, dots and dashes", name)
	}
	image = nodeImageRepo + ":" + name
	dir, err := os.MkdirTemp("", "trellis-aws-node-")
	if err != nil {
		return "", "", fmt.Errorf("failed to create a build directory for node image %s: %w", name, err)
	}
	defer os.RemoveAll(dir)
	if err := os.WriteFile(filepath.Join(dir, "node-image"), []byte(name+"\n"), 0o644); err != nil {
		return "", "", fmt.Errorf("failed to write the marker file of node image %s: %w", name, err)
	}
	df := "FROM " + base + "\nCOPY node-image " + MarkerFile + "\n"
	if err := os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte(df), 0o644); err != nil {
		return "", "", fmt.Errorf("failed to write the Dockerfile of node image %s: %w", name, err)
	}
	if _, err := docker(ctx, nil, "build", "-q", "-t", image, dir); err != nil {
		return "", "", err
	}
	out, err := c.RegisterImage(ctx, &ec2.RegisterImageInput{
		Name: aws.String(name), Architecture: ec2types.ArchitectureValuesX8664,
		RootDeviceName: aws.String("/dev/sda1"), VirtualizationType: aws.String("hvm"),
	})
	if err != nil {
		return "", "", fmt.Errorf("failed to register AMI %s: %w", name, err)
	}
	ami = aws.ToString(out.ImageId)
	if _, err := c.CreateTags(ctx, &ec2.CreateTagsInput{Resources: []string{ami}, Tags: []ec2types.Tag{{Key: aws.String(TagNodeImage), Value: aws.String(image)}}}); err != nil {
		return "", "", fmt.Errorf("failed to tag AMI %s: %w", ami, err)
	}
	return ami, image, nil
}

// KindNodeImage is the image of the kind cluster's control-plane node: the
// base of the instance node images.
func KindNodeImage(ctx context.Context, kind string) (string, error) {
	img, err := docker(ctx, nil, "inspect", "--format", "{{.Config.Image}}", controlPlane(kind))
	if err != nil {
		return "", fmt.Errorf("kind cluster %s: %w (run `trellis local up` first)", kind, err)
	}
	return img, nil
}

// RemoveNodeImages removes the node images registered in an emulator that
// is gone (every trellis.local/aws-node image no container uses); one in
// use, by another emulator's nodes, stays. It returns how many it removed.
func RemoveNodeImages(ctx context.Context) (int, error) {
	out, err := docker(ctx, nil, "images", "--filter", "reference="+nodeImageRepo, "--format", "{{.Repository}}:{{.Tag}}")
	if err != nil {
		return 0, err
	}
	n := 0
	for img := range strings.Lines(out) {
		img = strings.TrimSpace(img)
		if img == "" {
			continue
		}
		if _, err := docker(ctx, nil, "rmi", img); err == nil {
			n++
		} else if !strings.Contains(err.Error(), "being used") && !strings.Contains(err.Error(), "conflict") {
			return n, err
		}
	}
	return n, nil
}
