package bootstrap

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/google/go-cmp/cmp"
	"k8s.io/kops/pkg/client/simple"
	"k8s.io/kops/util/pkg/vfs"

	"github.com/trellis-dev/trellis/bootstrap/definition"
	"github.com/trellis-dev/trellis/bootstrap/statestore"
	"github.com/trellis-dev/trellis/test/fakes/fakeaws"
)

func setupKops(t *testing.T) {
	t.Helper()
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	t.Setenv("KOPS_RUN_TOO_NEW_VERSION", "1")
	if err := (Env{CacheDir: t.TempDir(), OfflineAssets: true}).Setup(); err != nil {
		t.Fatal(err)
	}
	vfs.Context.ResetMemfsContext(true)
}

func loadDef(t *testing.T, path string) *definition.ClusterDefinition {
	t.Helper()
	l, err := definition.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return l.ClusterDefinition
}

func installFake(t *testing.T, def *definition.ClusterDefinition) *fakeaws.Cloud {
	t.Helper()
	cloud, err := fakeaws.ForDefinition(def)
	if err != nil {
		t.Fatal(err)
	}
	return cloud
}

// TestLifecycleProd is the offline lifecycle of prod-us-east-1, the way kops
// tests itself: create against kops's AWS fake, check what the cloud holds,
// re-apply (no changes), then the upgrade's skew rules and its plan.
func TestLifecycleProd(t *testing.T) {
	setupKops(t)
	ctx := context.Background()
	def := loadDef(t, "../clusters/prod-us-east-1.yaml")
	// kops's fake drops mixed-instances policies, so it would plan the spot
	// pool again forever: that group is checked on the emulator (test/aws).
	def.InstanceGroups = slices.DeleteFunc(def.InstanceGroups, func(g definition.InstanceGroup) bool { return g.MixedInstances != nil })
	cloud := installFake(t, def)
	var out bytes.Buffer
	opts := ApplyOptions{StateStore: "memfs://state", Yes: true, Out: &out, Cloud: cloud}

	if _, err := Create(ctx, def, opts); err != nil {
		t.Fatalf("create: %v", err)
	}
	// The pod-identity root CA was created in the state store.
	if root, err := statestore.IdentityRoot(ctx, opts.StateStore, "prod-us-east-1.k8s.trellis.example"); err != nil || !root.Cert.IsCA {
		t.Errorf("identity root CA in the state store: %v", err)
	}

	// The fake holds what the definition asked for.
	var asgs []string
	for name, g := range cloud.FakeAutoscaling.Groups {
		asgs = append(asgs, name+"="+aws.ToString(g.LaunchTemplate.LaunchTemplateId)[:3])
	}
	sort.Strings(asgs)
	name := "prod-us-east-1.k8s.trellis.example"
	want := []string{
		"control-plane-us-east-1a.masters." + name + "=lt-",
		"control-plane-us-east-1b.masters." + name + "=lt-",
		"control-plane-us-east-1c.masters." + name + "=lt-",
		"general." + name + "=lt-",
		"gpu-training." + name + "=lt-",
		"highmem." + name + "=lt-",
	}
	if diff := cmp.Diff(want, asgs); diff != "" {
		t.Errorf("autoscaling groups (-want +got):\n%s", diff)
	}
	g := cloud.FakeAutoscaling.Groups["general."+name]
	if aws.ToInt32(g.MinSize) != 6 || aws.ToInt32(g.MaxSize) != 60 {
		t.Errorf("general group size: got %d..%d, want 6..60", aws.ToInt32(g.MinSize), aws.ToInt32(g.MaxSize))
	}
	var vpcs, subnets []string
	sgs := 0
	for _, id := range cloud.ResourceIDs() {
		switch {
		case strings.HasPrefix(id, "vpc-"):
			vpcs = append(vpcs, id)
		case strings.HasPrefix(id, "subnet-"):
			subnets = append(subnets, id)
		case strings.HasPrefix(id, "sg-"):
			sgs++
		}
	}
	if len(vpcs) != 1 || len(subnets) != 6 || sgs < 2 {
		t.Errorf("want 1 vpc, 6 subnets, >=2 security groups; got %v, %v, %d", vpcs, subnets, sgs)
	}
	vo, err := cloud.FakeEC2.DescribeVpcs(ctx, &ec2.DescribeVpcsInput{})
	if err != nil || len(vo.Vpcs) != 1 || aws.ToString(vo.Vpcs[0].CidrBlock) != "10.10.0.0/16" {
		t.Errorf("want one VPC 10.10.0.0/16, got %+v (%v)", vo, err)
	}
	lts := 0
	for id := range cloud.FakeEC2.LaunchTemplates {
		if strings.HasPrefix(id, "lt-") {
			lts++
		}
	}
	if lts != 6 {
		t.Errorf("want 6 launch templates, got %d", lts)
	}

	// A second apply plans no changes.
	dry := opts
	dry.Yes = false
	res, err := Update(ctx, def, dry)
	if err != nil {
		t.Fatalf("second apply: %v", err)
	}
	if len(res.Changes) != 0 || res.Plan.Changes {
		t.Fatalf("second apply: want no changes, got spec %v, cloud changes %v\n%s", res.Changes, res.Plan.Changes, out.String())
	}

	// Instances as AWS would launch them.
	old := cloud.LaunchInstances()
	if len(old) != 3+6+3+0 {
		t.Fatalf("launched %d instances, want 12", len(old))
	}

	// Skew rules hold before anything happens.
	for to, wantErr := range map[string]error{"1.35.4": ErrDowngrade, "1.35.5": ErrUpToDate, "1.37.0": ErrUnsupported, "1.36": ErrUnsupported} {
		_, err := Upgrade(ctx, def, UpgradeOptions{ApplyOptions: opts, To: to})
		if !errors.Is(err, wantErr) {
			t.Errorf("upgrade to %s: want %v, got %v", to, wantErr, err)
		}
	}

	// Dry-run upgrade: a plan, nothing stored.
	up, err := Upgrade(ctx, def, UpgradeOptions{ApplyOptions: dry, To: "1.36.1"})
	if err != nil {
		t.Fatalf("upgrade plan: %v", err)
	}
	if !up.Diff.Plan.Changes || !hasChange(up.Diff.Changes, "spec.kubernetesVersion", "v1.35.5", "v1.36.1") {
		t.Fatalf("upgrade plan: want a version change and cloud changes, got %+v", up.Diff)
	}
	if stored, _ := Stored(ctx, mustOpen(t, ctx), name); stored.Cluster.Spec.KubernetesVersion != "v1.35.5" {
		t.Fatalf("dry-run upgrade stored %s", stored.Cluster.Spec.KubernetesVersion)
	}

	// The real upgrade (stored, applied, every instance relaunched by the
	// rollout engine) runs against the AWS API emulator in test/aws: kops's
	// fake does not launch the instances a roll waits for.
}

func mustOpen(t *testing.T, ctx context.Context) simple.Clientset {
	t.Helper()
	cs, err := statestore.Open(ctx, "memfs://state")
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

func hasChange(cs []Change, path, old, new string) bool {
	for _, c := range cs {
		if c.Path == path && c.Old == old && c.New == new {
			return true
		}
	}
	return false
}

// TestCreateTerraform writes Terraform for the cluster instead of applying it.
func TestCreateTerraform(t *testing.T) {
	setupKops(t)
	ctx := context.Background()
	def := loadDef(t, "../clusters/staging-us-west-2.yaml")
	cloud := installFake(t, def)
	out := t.TempDir()
	var log bytes.Buffer
	plan, err := Create(ctx, def, ApplyOptions{StateStore: "memfs://tf", Target: TargetTerraform, OutDir: out, Out: &log, Cloud: cloud})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	if plan.Target != TargetTerraform {
		t.Errorf("target %s", plan.Target)
	}
	tf, err := os.ReadFile(filepath.Join(out, "kubernetes.tf"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`resource "aws_autoscaling_group" "general-staging-us-west-2-k8s-trellis-example"`,
		`resource "aws_lb" "api-staging-us-west-2-k8s-trellis-example"`,
		`\bcidr_block\s+= "10.20.0.0/16"`,
		`\bcidr_block\s+= "10.20.64.0/19"`,
	} {
		if !regexp.MustCompile(want).Match(tf) {
			t.Errorf("kubernetes.tf lacks %s", want)
		}
	}
	// Terraform output touches no cloud resource.
	if ids := cloud.ResourceIDs(); len(ids) > len(def.InstanceGroups)+1 {
		t.Errorf("terraform target created cloud resources: %v", ids)
	}
}
