package aws

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/trellis-dev/trellis/internal/awsemu"
	"github.com/trellis-dev/trellis/internal/awsemu/awsemutest"
)

// nvmeGroup adds a group of an instance type with a local NVMe disk: kops
// writes an instance-store mapping into its launch template.
func nvmeGroup(s string) string {
	return strings.Replace(s, "instanceGroups:\n", `instanceGroups:
- name: nvme
  machineType: m6id.large
  image: ssm:/trellis/local-aws/images/node
  minSize: 1
  maxSize: 2
  zones: [us-east-1a]
`, 1)
}

// otherCluster is the same definition under another name: a second cluster
// in the same account and state-store bucket.
func otherCluster(s string) string {
	return strings.Replace(s, "name: local-aws\n", "name: other-aws\n", 1)
}

const otherName = "other-aws.k8s.trellis.local"

// thirdCluster is a third name in the same account and bucket.
func thirdCluster(s string) string {
	return strings.Replace(s, "name: local-aws\n", "name: third-aws\n", 1)
}

const thirdName = "third-aws.k8s.trellis.local"

// fourthCluster is a fourth name, for a create whose routes wait.
func fourthCluster(s string) string {
	return strings.Replace(s, "name: local-aws\n", "name: fourth-aws\n", 1)
}

const fourthName = "fourth-aws.k8s.trellis.local"

// TestIntegrationNewcomerLifecycle runs what a newcomer runs on the local
// AWS loop, through the trellis binary: plan, create, kubeconfig, delete,
// with a second cluster whose create failed (and one interrupted) in the
// same account and bucket.
func TestIntegrationNewcomerLifecycle(t *testing.T) {
	emu := awsemutest.Start(t)
	proxy := awsemutest.Proxy(t, emu)
	c := awsemu.NewClients(emu.URL, "us-east-1")
	seedAccount(t, c)
	def := definition(t, nvmeGroup)
	other := definition(t, otherCluster)
	third := definition(t, thirdCluster)
	fourth := definition(t, fourthCluster)
	env := []string{"TRELLIS_AWS_EMULATOR=" + proxy.URL, "KOPS_STATE_STORE=" + state}
	trellis := func(args ...string) result { return run(t, env, trellisBin, args...) }

	t.Run("errors name every unknown image and the arm64 fix", func(t *testing.T) {
		teachingErrors(t, c, trellis)
	})

	t.Run("a plan writes nothing and names the next command", func(t *testing.T) {
		keepsStore(t, c, "the plan", func() {
			r := trellis("cluster", "create", "-f", def)
			next := "trellis cluster create -f " + def + " --state " + state + " --yes"
			if r.code != 0 || !strings.Contains(r.out, "Plan only: nothing was written") || !strings.Contains(r.out, next) || !strings.Contains(r.out, "AutoscalingGroup/nvme."+clusterName) {
				t.Fatalf("create without --yes: %s; want the plan and %q", r, next)
			}
		})
		if _, ok := objects(t, c, bucket)["clusters/"+clusterName+"/trellis/pki/root-key.pem"]; ok {
			t.Fatal("the plan stored the identity root's key")
		}
		if n := len(owned(t, c, clusterName)); n != 0 {
			t.Fatalf("the plan made %d cloud resources", n)
		}
	})

	t.Run("create --yes after the plan makes the local-disk group", func(t *testing.T) {
		r := trellis("cluster", "create", "-f", def, "--yes")
		if r.code != 0 || !strings.Contains(r.out, "Cluster "+clusterName+" applied.") || !strings.Contains(r.out, "trellis cluster kubeconfig -f "+def) {
			t.Fatalf("create --yes: %s", r)
		}
		lt := launchTemplate(t, c, "nvme."+clusterName)
		var store *ec2types.LaunchTemplateBlockDeviceMapping
		for i, m := range lt.BlockDeviceMappings {
			if awssdk.ToString(m.VirtualName) == "ephemeral0" {
				store = &lt.BlockDeviceMappings[i]
			}
		}
		if store == nil || awssdk.ToString(store.DeviceName) != "/dev/sdc" || store.Ebs != nil || lt.BlockDeviceMappings[0].Ebs == nil {
			t.Errorf("nvme's launch template mappings %+v; want the root volume, then /dev/sdc as ephemeral0 without Ebs, as AWS holds them", lt.BlockDeviceMappings)
		}
		if ids := groupInstances(t, c)["nvme."+clusterName]; len(ids) != 1 {
			t.Errorf("nvme group has instances %v, want 1", ids)
		}
	})

	t.Run("create --yes again is refused and names update", func(t *testing.T) {
		keepsStore(t, c, "the second create", func() {
			r := trellis("cluster", "create", "-f", def, "--yes")
			if r.code == 0 || !strings.Contains(r.stderr, "already exists") || !strings.Contains(r.stderr, "trellis cluster update -f "+def+" --state "+state) {
				t.Errorf("a second create --yes: %s; want it refused, naming `trellis cluster update`", r)
			}
		})
	})

	t.Run("kubeconfig writes a short-lived admin credential and no CA key", func(t *testing.T) {
		kc := filepath.Join(t.TempDir(), "kubeconfig")
		r := trellis("cluster", "kubeconfig", "-f", def, "--admin", "30m", "--kubeconfig", kc)
		if r.code != 0 || !strings.Contains(r.out, "Wrote context "+clusterName) {
			t.Fatalf("kubeconfig: %s", r)
		}
		cfg, err := clientcmd.LoadFromFile(kc)
		if err != nil {
			t.Fatal(err)
		}
		if cfg.CurrentContext != clusterName || cfg.Contexts[clusterName] == nil {
			t.Fatalf("kubeconfig contexts %v, current %q; want %s", cfg.Contexts, cfg.CurrentContext, clusterName)
		}
		user := cfg.AuthInfos[cfg.Contexts[clusterName].AuthInfo]
		blk, _ := pem.Decode(user.ClientCertificateData)
		if blk == nil {
			t.Fatal("no client certificate in the kubeconfig")
		}
		cert, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		// kops backdates NotBefore by 48h for clock skew, as on AWS; the
		// lifetime is where it ends.
		if until := time.Until(cert.NotAfter); until > 31*time.Minute || until < 25*time.Minute {
			t.Errorf("admin certificate expires in %s, want about 30m", until)
		}
		if !slices.Equal(cert.Subject.Organization, []string{"system:masters"}) || !slices.Contains(cert.ExtKeyUsage, x509.ExtKeyUsageClientAuth) {
			t.Errorf("admin certificate subject %s, usages %v; want O=system:masters, client auth", cert.Subject, cert.ExtKeyUsage)
		}
		roots := x509.NewCertPool()
		if !roots.AppendCertsFromPEM(cfg.Clusters[clusterName].CertificateAuthorityData) {
			t.Fatal("no CA in the kubeconfig")
		}
		if _, err := cert.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
			t.Errorf("admin certificate does not chain to the cluster's CA: %v", err)
		}
		file, err := os.ReadFile(kc)
		if err != nil {
			t.Fatal(err)
		}
		for _, secret := range caKeyMaterial(t, c, clusterName) {
			if strings.Contains(r.out+r.stderr+string(file)+string(user.ClientKeyData), secret) {
				t.Fatalf("the CA's private key appears in the output or the kubeconfig")
			}
		}
		if strings.Contains(r.out+r.stderr, "PRIVATE KEY") {
			t.Errorf("kubeconfig printed key material: %s", r)
		}
	})

	t.Run("a failed create names the task and the code, and leaves its resources", func(t *testing.T) {
		keepsStore(t, c, "the failed create", func() {
			proxy.Refuse("CreateAutoScalingGroup", -1)
			defer proxy.Clear()
			r := trellis("cluster", "create", "-f", other, "--yes", "--task-timeout", "3s")
			if r.code == 0 || !regexp.MustCompile(`AutoscalingGroup/[a-z0-9.-]+\.`+regexp.QuoteMeta(otherName)).MatchString(r.stderr) ||
				!strings.Contains(r.stderr, awsemu.FaultCode) || !strings.Contains(r.stderr, "state store was restored") {
				t.Fatalf("create with CreateAutoScalingGroup refused: %s; want the task, the code %s and the store restored", r, awsemu.FaultCode)
			}
		})
		if len(owned(t, c, otherName)) == 0 {
			t.Fatal("the failed create left nothing in the cloud: nothing to test delete on")
		}
	})

	t.Run("an interrupted create says what it waits on, stops and restores the store", func(t *testing.T) {
		keepsStore(t, c, "the interrupted create", func() {
			proxy.Refuse("CreateAutoScalingGroup", -1)
			defer proxy.Clear()
			cmd := exec.Command(trellisBin, "cluster", "create", "-f", other, "--yes", "--task-timeout", "10m", "--progress-interval", "2s")
			cmd.Env = append(os.Environ(), env...)
			var out, errb syncBuffer
			cmd.Stdout, cmd.Stderr = &out, &errb
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			deadline := time.Now().Add(3 * time.Minute)
			waiting := func() bool { return len(failingLines(out.String(), "AutoscalingGroup/")) == 0 }
			for waiting() && time.Now().Before(deadline) {
				time.Sleep(200 * time.Millisecond)
			}
			if waiting() {
				_ = cmd.Process.Kill()
				_ = cmd.Wait()
				t.Fatalf("no progress line while kops retried:\n%s\n%s", out.String(), errb.String())
			}
			sent := time.Now()
			if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
				t.Fatal(err)
			}
			err := cmd.Wait()
			took := time.Since(sent)
			if took > 10*time.Second || err == nil || !strings.Contains(errb.String(), "interrupted") || !strings.Contains(errb.String(), "state store was restored") {
				t.Fatalf("after SIGINT: exit %v in %s\n%s\n%s; want a failure within 10s that restored the store", err, took, out.String(), errb.String())
			}
			checkCoded(t, out.String(), "AutoscalingGroup/")
			t.Logf("stopped %s after SIGINT", took.Round(time.Millisecond))
		})
	})

	t.Run("a refused route names its task and the code", func(t *testing.T) {
		refusedRoute(t, c, proxy, trellis, third)
	})

	t.Run("a route waiting on its NAT gateway says so", func(t *testing.T) {
		waitingRoute(t, c, proxy, trellis, fourth)
	})

	t.Run("delete without --yes lists and deletes nothing", func(t *testing.T) {
		before := owned(t, c, otherName)
		keepsStore(t, c, "the delete plan", func() {
			r := trellis("cluster", "delete", "-f", other)
			if r.code != 0 || !strings.Contains(r.out, "Plan only: nothing was deleted") || !strings.Contains(r.out, "vpc") {
				t.Fatalf("delete plan: %s", r)
			}
		})
		if after := owned(t, c, otherName); !slices.Equal(before, after) {
			t.Fatalf("the delete plan changed the cloud: %v -> %v", before, after)
		}
	})

	t.Run("delete after failed creates removes all they left, and no other cluster's", func(t *testing.T) {
		mine := owned(t, c, clusterName)
		files := prefixed(objects(t, c, bucket), "clusters/"+clusterName+"/")
		// An address a stopped delete left alone: its NAT gateway and
		// route table are gone, so only its ownership tag finds it.
		alone := ownedAddress(t, c, otherName)
		for f, name := range map[string]string{other: otherName, third: thirdName, fourth: fourthName} {
			r := trellis("cluster", "delete", "-f", f, "--yes", "--wait", "3m")
			if r.code != 0 || !strings.Contains(r.out, "Deleted cluster "+name) {
				t.Fatalf("delete --yes: %s", r)
			}
			// kops's own listing by ownership tags, resource by resource
			// (moto keeps a deleted resource's tags in DescribeTags).
			if r := trellis("cluster", "delete", "-f", f); r.code != 0 || !strings.Contains(r.out, "No cloud resources of "+name) {
				t.Errorf("left owned by %s: %s", name, r)
			}
		}
		if a, err := c.EC2.DescribeAddresses(context.Background(), &ec2.DescribeAddressesInput{}); err != nil {
			t.Fatal(err)
		} else if slices.ContainsFunc(a.Addresses, func(a ec2types.Address) bool { return awssdk.ToString(a.AllocationId) == alone }) {
			t.Errorf("the delete of %s left its address %s, tagged as owned by it", otherName, alone)
		}
		if after := owned(t, c, clusterName); !slices.Equal(mine, after) {
			t.Errorf("deleting %s changed %s's resources: %v -> %v", otherName, clusterName, mine, after)
		}
		if d := sameObjects(files, prefixed(objects(t, c, bucket), "clusters/"+clusterName+"/")); d != "" {
			t.Errorf("deleting %s changed %s's state store:\n%s", otherName, clusterName, d)
		}
	})

	t.Run("an interrupted delete stops between passes and keeps the store", func(t *testing.T) {
		interruptedDelete(t, c, proxy, env, def)
	})

	t.Run("delete removes the cluster and its state-store folder", func(t *testing.T) {
		kopsAgreesOnDelete(t, emu.URL, trellis, def)
		r := trellis("cluster", "delete", "-f", def, "--yes", "--wait", "3m")
		if r.code != 0 || !strings.Contains(r.out, "Deleted cluster "+clusterName) {
			t.Fatalf("delete --yes: %s", r)
		}
		if r := trellis("cluster", "delete", "-f", def); r.code != 0 || !strings.Contains(r.out, "No cloud resources of "+clusterName) {
			t.Errorf("left owned by %s: %s", clusterName, r)
		}
		objs := objects(t, c, bucket)
		if files := prefixed(objs, "clusters/"+clusterName+"/"); len(files) > 0 {
			t.Errorf("state store keeps %d files of %s", len(files), clusterName)
		}
		if _, ok := objs["clusters/other.example/config"]; !ok {
			t.Error("delete removed another cluster's file from the bucket")
		}
		if r := trellis("cluster", "create", "-f", def); r.code != 0 || !strings.Contains(r.out, "Plan only") {
			t.Errorf("a plan after the delete: %s", r)
		}
		if r := run(t, kopsEnv(emu.URL), kopsBinary(t), "get", "clusters", "--state", state); strings.Contains(r.out, clusterName) {
			t.Errorf("kops still lists %s after the delete: %s", clusterName, r)
		}
	})
}

// owned lists what the cloud holds tagged for a cluster (kops's ownership
// tags), as type:id, sorted: EC2 resources but terminated instances, and
// autoscaling groups.
// ownedAddress allocates an Elastic IP tagged as kops tags a NAT
// gateway's address, and returns its allocation id.
func ownedAddress(t *testing.T, c *awsemu.Clients, cluster string) string {
	t.Helper()
	a, err := c.EC2.AllocateAddress(context.Background(), &ec2.AllocateAddressInput{Domain: ec2types.DomainTypeVpc,
		TagSpecifications: []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeElasticIp, Tags: []ec2types.Tag{
			{Key: awssdk.String("kubernetes.io/cluster/" + cluster), Value: awssdk.String("owned")},
			{Key: awssdk.String("Name"), Value: awssdk.String("left-alone." + cluster)},
		}}}})
	if err != nil {
		t.Fatalf("allocate an address owned by %s: %v", cluster, err)
	}
	return awssdk.ToString(a.AllocationId)
}

func owned(t *testing.T, c *awsemu.Clients, cluster string) []string {
	t.Helper()
	ctx := context.Background()
	var out []string
	for _, f := range [][]ec2types.Filter{
		{{Name: awssdk.String("key"), Values: []string{"kubernetes.io/cluster/" + cluster}}},
		{{Name: awssdk.String("key"), Values: []string{"KubernetesCluster"}}, {Name: awssdk.String("value"), Values: []string{cluster}}},
	} {
		p := ec2.NewDescribeTagsPaginator(c.EC2, &ec2.DescribeTagsInput{Filters: f})
		for p.HasMorePages() {
			page, err := p.NextPage(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, tag := range page.Tags {
				id := string(tag.ResourceType) + ":" + awssdk.ToString(tag.ResourceId)
				if tag.ResourceType == ec2types.ResourceTypeInstance && terminated(t, c, awssdk.ToString(tag.ResourceId)) {
					continue
				}
				if !slices.Contains(out, id) {
					out = append(out, id)
				}
			}
		}
	}
	asgs, err := c.ASG.DescribeAutoScalingGroups(ctx, &autoscaling.DescribeAutoScalingGroupsInput{})
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range asgs.AutoScalingGroups {
		for _, tag := range g.Tags {
			k, v := awssdk.ToString(tag.Key), awssdk.ToString(tag.Value)
			if k == "kubernetes.io/cluster/"+cluster || k == "KubernetesCluster" && v == cluster {
				out = append(out, "asg:"+awssdk.ToString(g.AutoScalingGroupName))
				break
			}
		}
	}
	sort.Strings(out)
	return out
}

func terminated(t *testing.T, c *awsemu.Clients, id string) bool {
	t.Helper()
	d, err := c.EC2.DescribeInstances(context.Background(), &ec2.DescribeInstancesInput{InstanceIds: []string{id}})
	if err != nil || len(d.Reservations) == 0 {
		return true
	}
	s := d.Reservations[0].Instances[0].State
	return s != nil && (s.Name == ec2types.InstanceStateNameTerminated || s.Name == ec2types.InstanceStateNameShuttingDown)
}

// caKeyMaterial returns the cluster CA's private key material as the state
// store holds it (base64 in kops's keyset), each line long enough to be
// unmistakable.
func caKeyMaterial(t *testing.T, c *awsemu.Clients, cluster string) []string {
	t.Helper()
	key := "clusters/" + cluster + "/pki/private/kubernetes-ca/keyset.yaml"
	obj, err := c.S3.GetObject(context.Background(), &s3.GetObjectInput{Bucket: awssdk.String(bucket), Key: awssdk.String(key)})
	if err != nil {
		t.Fatalf("the CA's keyset %s: %v", key, err)
	}
	defer obj.Body.Close()
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(obj.Body); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range regexp.MustCompile(`privateMaterial: (\S{300,})`).FindAllStringSubmatch(buf.String(), -1) {
		// From the middle: every PEM key starts alike.
		out = append(out, m[1][200:260])
		if pemText, err := base64.StdEncoding.DecodeString(m[1]); err == nil {
			if lines := strings.Split(string(pemText), "\n"); len(lines) > 5 {
				out = append(out, lines[3])
			}
		}
	}
	if len(out) == 0 {
		t.Fatalf("no private material in %s", key)
	}
	return out
}

// prefixed is the listing's entries under a prefix.
func prefixed(objs map[string]string, prefix string) map[string]string {
	out := map[string]string{}
	for k, v := range objs {
		if strings.HasPrefix(k, prefix) {
			out[k] = v
		}
	}
	return out
}

// syncBuffer is a buffer a running process writes while the test reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
