package aws

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/pem"
	"slices"
	"strings"
	"testing"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/trellis-dev/trellis/bootstrap/rollout"
	"github.com/trellis-dev/trellis/bootstrap/statestore"
	"github.com/trellis-dev/trellis/internal/awsemu"
	"github.com/trellis-dev/trellis/internal/awsemu/awsemutest"
	"github.com/trellis-dev/trellis/internal/testutil/cluster"
)

const (
	bucket      = "trellis-state"
	state       = "s3://" + bucket + "/clusters"
	clusterName = "local-aws.k8s.trellis.local"
	imageParam  = "/trellis/local-aws/images/node"
)

// seedAccount puts into the emulator what an account has before a cluster:
// the state-store bucket (with another cluster's file in it) and the image.
func seedAccount(t *testing.T, c *awsemu.Clients) string {
	t.Helper()
	ctx := context.Background()
	if err := c.Bucket(ctx, bucket); err != nil {
		t.Fatal(err)
	}
	if _, err := c.S3.PutObject(ctx, &s3.PutObjectInput{Bucket: awssdk.String(bucket), Key: awssdk.String("clusters/other.example/config"), Body: bytes.NewReader([]byte("another cluster"))}); err != nil {
		t.Fatal(err)
	}
	ami, err := c.Image(ctx, "trellis-node-v1.36.3", "x86_64")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Parameter(ctx, imageParam, ami); err != nil {
		t.Fatal(err)
	}
	return ami
}

// TestIntegrationClusterLifecycle runs create, diff and upgrade through the
// trellis binary against the emulator, with calls refused on the way, and
// checks with the real kops CLI.
func TestIntegrationClusterLifecycle(t *testing.T) {
	emu := awsemutest.Start(t)
	proxy := awsemutest.Proxy(t, emu)
	aws := awsemu.NewClients(emu.URL, "us-east-1")
	seedAccount(t, aws)
	// 1.35 so that there is an upgrade to try.
	def := definition(t, func(s string) string {
		return strings.Replace(s, "kubernetesVersion: 1.36.1", "kubernetesVersion: 1.35.5", 1)
	})
	env := []string{"TRELLIS_AWS_EMULATOR=" + proxy.URL, "KOPS_STATE_STORE=" + state}
	trellis := func(args ...string) result { return run(t, env, trellisBin, args...) }

	t.Run("a refused call leaves the state store as it was", func(t *testing.T) {
		keepsStore(t, aws, "the failed create", func() {
			proxy.Refuse("CreateAutoScalingGroup", -1)
			defer proxy.Clear()
			r := trellis("cluster", "create", "-f", def, "--yes", "--task-timeout", "3s")
			if r.code == 0 || !strings.Contains(r.stderr, "refused by the test's fault proxy") || !strings.Contains(r.stderr, "state store was restored") {
				t.Fatalf("create with CreateAutoScalingGroup refused: %s", r)
			}
		})
	})

	t.Run("create applies every resource", func(t *testing.T) {
		r := trellis("cluster", "create", "-f", def, "--yes")
		if r.code != 0 || !strings.Contains(r.out, "Cluster "+clusterName+" applied.") {
			t.Fatalf("create --yes: %s", r)
		}
		want := map[string]int32{"control-plane-us-east-1a.masters." + clusterName: 1, "general." + clusterName: 2, "batch." + clusterName: 1}
		out, err := aws.ASG.DescribeAutoScalingGroups(context.Background(), &autoscaling.DescribeAutoScalingGroupsInput{})
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range out.AutoScalingGroups {
			name := *g.AutoScalingGroupName
			if n, ok := want[name]; ok && int32(len(g.Instances)) == n && *g.DesiredCapacity == n {
				delete(want, name)
			}
		}
		if len(want) > 0 {
			t.Errorf("groups missing or with the wrong instance count: %v", want)
		}
		stored := objects(t, aws, bucket)
		for _, k := range []string{"config", "instancegroup/general", "instancegroup/batch", "cluster-completed.spec", "trellis/pki/root.pem", "trellis/pki/root-key.pem"} {
			if _, ok := stored["clusters/"+clusterName+"/"+k]; !ok {
				t.Errorf("state store lacks %s", k)
			}
		}
	})

	t.Run("a fleet join reads the cluster's CA that kops made in S3", func(t *testing.T) {
		// The binary, with the emulator from $TRELLIS_AWS_EMULATOR alone: a
		// member that is not this cluster (a loopback control plane with a
		// CA of its own) is refused before anything is written, on the
		// member or the fleet (its own apiserver stands in for the fleet's:
		// it is never reached).
		member := cluster.Start(t, cluster.Options{})
		r := trellis("fleet", "join", "-f", def, "--kubeconfig", member.Kubeconfig, "--fleet-kubeconfig", member.Kubeconfig, "--state", state, "--wait", "0")
		if r.code == 0 || !strings.Contains(r.stderr, "does not present a certificate of the cluster's CA in state store "+state) ||
			!strings.Contains(r.stderr, "certificate signed by unknown authority") {
			t.Fatalf("join of another cluster against the state store: %s", r)
		}
		if _, err := member.Client.CoreV1().Namespaces().Get(context.Background(), "karmada-cluster", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Fatalf("a refused join wrote to the member: namespace karmada-cluster: %v", err)
		}

		// In process: what the join trusts is kops's own CA.
		for _, kv := range kopsEnv(proxy.URL) {
			k, v, _ := strings.Cut(kv, "=")
			t.Setenv(k, v)
		}
		pemCA, err := statestore.ClusterCA(context.Background(), state, clusterName)
		if err != nil {
			t.Fatal(err)
		}
		block, _ := pem.Decode(pemCA)
		if block == nil {
			t.Fatalf("ClusterCA returned no PEM: %q", pemCA)
		}
		ca, err := x509.ParseCertificate(block.Bytes)
		if err != nil || !ca.IsCA || ca.Subject.CommonName != "kubernetes-ca" {
			t.Fatalf("the state store's CA: %v %+v, want kops's kubernetes-ca", err, ca)
		}
	})

	t.Run("diff after create shows no changes", func(t *testing.T) {
		r := trellis("cluster", "diff", "-f", def)
		if r.code != 0 || !strings.Contains(r.out, "Spec: no changes.") || !strings.Contains(r.out, "Cloud: no changes.") {
			t.Fatalf("diff: %s", r)
		}
	})

	t.Run("kops itself sees no changes", func(t *testing.T) {
		r := run(t, kopsEnv(proxy.URL), kopsBinary(t), "update", "cluster", "--name", clusterName, "--state", state)
		if r.code != 0 || !strings.Contains(r.out+r.stderr, "No changes need to be applied") {
			t.Fatalf("kops update cluster: %s", r)
		}
	})

	t.Run("a second create is refused and writes nothing", func(t *testing.T) {
		keepsStore(t, aws, "the refused create", func() {
			r := trellis("cluster", "create", "-f", def, "--yes")
			if r.code == 0 || !strings.Contains(r.stderr, "already exists") {
				t.Fatalf("second create: %s", r)
			}
		})
	})

	t.Run("ami rollout without --yes prints the plan and changes nothing", func(t *testing.T) {
		ctx := context.Background()
		newAMI, err := aws.Image(ctx, "trellis-node-next", "x86_64")
		if err != nil {
			t.Fatal(err)
		}
		versions := func() int {
			out, err := aws.EC2.DescribeLaunchTemplateVersions(ctx, &ec2.DescribeLaunchTemplateVersionsInput{LaunchTemplateName: awssdk.String("general." + clusterName)})
			if err != nil {
				t.Fatal(err)
			}
			return len(out.LaunchTemplateVersions)
		}
		n := versions()
		keepsStore(t, aws, "the plan", func() {
			r := trellis("ami", "rollout", "-f", def, "--image", newAMI)
			if r.code != 0 || !strings.Contains(r.out, "Nothing changed. Pass --yes") || !strings.Contains(r.out, newAMI) {
				t.Fatalf("ami rollout plan: %s", r)
			}
			for _, want := range []string{"batch    1      in place, 1 unavailable, canary  1", "general  2      surge 1, canary                  2"} {
				if !strings.Contains(r.out, want) {
					t.Errorf("plan lacks %q:\n%s", want, r.out)
				}
			}
		})
		if versions() != n {
			t.Error("the plan made a launch-template version")
		}
		if r := trellis("ami", "status", "-f", def); r.code == 0 || !strings.Contains(r.stderr, "no rollout") {
			t.Errorf("status after a plan: %s", r)
		}
	})

	t.Run("a refused call during upgrade leaves the state store as it was", func(t *testing.T) {
		keepsStore(t, aws, "the failed upgrade", func() {
			proxy.Refuse("CreateLaunchTemplateVersion", -1)
			defer proxy.Clear()
			r := trellis("cluster", "upgrade", "-f", def, "--to", "1.36.1", "--yes", "--task-timeout", "3s")
			if r.code == 0 || !strings.Contains(r.stderr, "refused by the test's fault proxy") || !strings.Contains(r.stderr, "state store was restored") {
				t.Fatalf("upgrade with CreateLaunchTemplateVersion refused: %s", r)
			}
		})
		if r := trellis("cluster", "diff", "-f", def); r.code != 0 || !strings.Contains(r.out, "Spec: no changes.") {
			t.Errorf("diff after the failed upgrade: %s", r)
		}
	})

	t.Run("upgrade rolls the control plane alone, then the nodes, on the rollout engine", func(t *testing.T) {
		before := groupInstances(t, aws)
		r := trellis("cluster", "upgrade", "-f", def, "--to", "1.36.1", "--yes", "--gate-timeout", "2m")
		if r.code != 0 || !strings.Contains(r.out, "Upgraded "+clusterName+" to v1.36.1") {
			t.Fatalf("upgrade --yes: %s", r)
		}
		after := groupInstances(t, aws)
		for g, old := range before {
			if len(after[g]) != len(old) {
				t.Errorf("%s: %d instances after the upgrade, %d before", g, len(after[g]), len(old))
			}
			for _, id := range old {
				if slices.Contains(after[g], id) {
					t.Errorf("%s: instance %s survived the upgrade", g, id)
				}
			}
		}
		st := rolloutState(t, trellis, def)
		if st.Status != rollout.StatusDone || st.Reason != "upgrade to v1.36.1" {
			t.Fatalf("the upgrade's rollout: %s %q", st.Status, st.Reason)
		}
		cp := st.Groups["control-plane-us-east-1a"]
		for _, g := range []string{"general", "batch"} {
			if n := st.Groups[g]; n == nil || n.Started.Before(cp.Finished) || len(n.Replaced) != len(before[g+"."+clusterName]) {
				t.Errorf("node group %s: %+v; want it started after the control plane finished (%s) and every instance replaced", g, n, cp.Finished)
			}
		}
		if !cp.Strategy.CloudOnly || cp.Strategy.MaxUnavailable != 1 || cp.Strategy.MaxSurge != 0 {
			t.Errorf("control plane rolled with %+v, want in place, one at a time, cloud-only (no kubeconfig)", cp.Strategy)
		}
		upgraded := definition(t, nil) // 1.36.1
		if r := trellis("cluster", "diff", "-f", upgraded); r.code != 0 || !strings.Contains(r.out, "Spec: no changes.") || !strings.Contains(r.out, "Cloud: no changes.") {
			t.Errorf("diff after the upgrade: %s", r)
		}
		if r := run(t, kopsEnv(proxy.URL), kopsBinary(t), "update", "cluster", "--name", clusterName, "--state", state); r.code != 0 || !strings.Contains(r.out+r.stderr, "No changes need to be applied") {
			t.Errorf("kops update cluster after the upgrade: %s", r)
		}
		for to, want := range map[string]string{"1.36.1": "already at that version", "1.35.5": "downgrades are not supported", "1.38.0": "unsupported Kubernetes version"} {
			if r := trellis("cluster", "upgrade", "-f", upgraded, "--to", to, "--yes"); r.code == 0 || !strings.Contains(r.stderr, want) {
				t.Errorf("upgrade to %s after the upgrade: %s; want %q", to, r, want)
			}
		}
	})

	t.Run("pause, resume, abort, status and rollback across processes", func(t *testing.T) {
		controls(t, aws, env, definition(t, nil))
	})
}
