package cluster_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/trellis-dev/trellis/bootstrap/health"
	"github.com/trellis-dev/trellis/cli"
	clustercmd "github.com/trellis-dev/trellis/cli/cluster"
	"github.com/trellis-dev/trellis/internal/testutil/cluster"
	"github.com/trellis-dev/trellis/test/fakes/fakeaws"
)

// noAWS makes sure no test reaches AWS, whatever the machine has configured.
func noAWS(t *testing.T) {
	t.Helper()
	for _, k := range []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"} {
		t.Setenv(k, "")
	}
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	t.Setenv("TRELLIS_CACHE", t.TempDir())
}

func run(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = cli.MainWith(context.Background(), args, cli.Streams{In: strings.NewReader(""), Out: &out, Err: &errb},
		cli.Options{Cluster: clustercmd.Options{OfflineCloud: fakeaws.OfflineCloud}})
	return code, out.String(), errb.String()
}

func abs(t *testing.T, p string) string {
	t.Helper()
	a, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// TestCreateRejectsBadDefinition is the acceptance case: a typo'd field, an
// out-of-VPC subnet and min > max give one error listing all three with
// file:line, and nothing is written to the state store.
func TestCreateRejectsBadDefinition(t *testing.T) {
	noAWS(t)
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	body := `apiVersion: trellis.dev/v1alpha1
kind: ClusterDefinition
base: ` + abs(t, "../../clusters/base/aws.yaml") + `
name: bad
region: us-east-1
zones: [us-east-1a]
network:
  vpcCIDR: 10.30.0.0/16
  subnets:
  - {zone: us-east-1a, private: 10.30.32.0/19, public: 10.99.0.0/22}
instanceGroups:
- name: general
  machineType: m6i.large
  image: ami-0a1b2c3d4e5f60718
  minSize: 5
  maxSize: 2
  zones: [us-east-1a]
  lables: {a: b}
runtime:
  logSink: {brokers: ["kafka:9092"]}
`
	if err := os.WriteFile(bad, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(dir, "state")
	code, _, stderr := run(t, "cluster", "create", "-f", bad, "--state", "file://"+state)
	if code != cli.ExitFailed {
		t.Fatalf("exit code %d, want %d; stderr:\n%s", code, cli.ExitFailed, stderr)
	}
	for _, want := range []string{
		bad + ":10:56: network.subnets[0].public: Invalid value: \"10.99.0.0/22\": subnet is outside the VPC 10.30.0.0/16",
		bad + ":16:12: instanceGroups[0].maxSize: Invalid value: 2: must be at least minSize (5)",
		bad + ":18:3: instanceGroups[0].lables: unknown field \"lables\" (did you mean \"labels\"?)",
		"3 problem(s)",
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	if _, err := os.Stat(state); !os.IsNotExist(err) {
		t.Errorf("state store was written (%v)", err)
	}
}

func TestRenderPrintsKopsYAML(t *testing.T) {
	noAWS(t)
	code, out, stderr := run(t, "cluster", "render", "-f", "../../clusters/prod-us-east-1.yaml")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	want, err := os.ReadFile("../../clusters/expected/prod-us-east-1.kops.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if out != string(want) {
		t.Errorf("render output differs from clusters/expected/prod-us-east-1.kops.yaml")
	}
}

// TestProductBuildPlansWithoutAFake: the product binary (no offline cloud
// wired) has no --fake-aws; without credentials its plan validates the
// definition, skips the cloud plan and writes nothing.
func TestProductBuildPlansWithoutAFake(t *testing.T) {
	noAWS(t)
	dir := filepath.Join(t.TempDir(), "state")
	product := func(args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		code := cli.Main(context.Background(), args, cli.Streams{In: strings.NewReader(""), Out: &out, Err: &errb})
		return code, out.String(), errb.String()
	}
	code, out, stderr := product("cluster", "create", "-f", "../../clusters/prod-us-east-1.yaml", "--state", "file://"+dir)
	if code != 0 || !strings.Contains(out, "cloud plan skipped (no AWS credentials). Nothing was written.") {
		t.Fatalf("plan without credentials: exit %d\nstdout %s\nstderr %s", code, out, stderr)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the plan wrote the state store (%v)", err)
	}
	if code, _, stderr := product("cluster", "create", "-f", "../../clusters/prod-us-east-1.yaml", "--state", "file://"+dir, "--fake-aws"); code == 0 || !strings.Contains(stderr, "unknown flag: --fake-aws") {
		t.Errorf("--fake-aws in the product build: exit %d, %s", code, stderr)
	}
}

func TestCreateTwiceFails(t *testing.T) {
	noAWS(t)
	state := "file://" + filepath.Join(t.TempDir(), "state")
	// prod: kops's fake cannot apply staging's warm pool.
	if code, _, stderr := run(t, "cluster", "create", "-f", "../../clusters/prod-us-east-1.yaml", "--state", state, "--fake-aws", "--yes"); code != 0 {
		t.Fatalf("first create: %s", stderr)
	}
	code, _, stderr := run(t, "cluster", "create", "-f", "../../clusters/prod-us-east-1.yaml", "--state", state, "--fake-aws", "--yes")
	next := "trellis cluster update -f ../../clusters/prod-us-east-1.yaml --state " + state
	if code == 0 || !strings.Contains(stderr, "already exists") || !strings.Contains(stderr, next) {
		t.Fatalf("second create: exit %d, stderr %s", code, stderr)
	}
}

func kopsBinary(t *testing.T) string {
	t.Helper()
	cache := os.Getenv("TRELLIS_CACHE")
	if cache == "" {
		home, _ := os.UserCacheDir()
		cache = filepath.Join(home, "trellis")
	}
	matches, _ := filepath.Glob(filepath.Join(cache, "kops", "v*", "kops"))
	if len(matches) == 0 {
		t.Fatalf("kops CLI not built in %s: run `make tools`", cache)
	}
	return matches[len(matches)-1]
}

// TestIntegrationKopsCLIReadsStateStore checks that the real kops CLI, built
// from the pinned module, reads back what `trellis cluster create` stored.
func TestIntegrationKopsCLIReadsStateStore(t *testing.T) {
	kops := kopsBinary(t)
	noAWS(t)
	state := "file://" + filepath.Join(t.TempDir(), "state")
	if code, _, stderr := run(t, "cluster", "create", "-f", "../../clusters/prod-us-east-1.yaml", "--state", state, "--fake-aws", "--yes"); code != 0 {
		t.Fatalf("create: %s", stderr)
	}
	name := "prod-us-east-1.k8s.trellis.example"
	out, err := exec.Command(kops, "get", "cluster", "--state", state, "--name", name, "-o", "yaml").CombinedOutput()
	if err != nil {
		t.Fatalf("kops get cluster: %v\n%s", err, out)
	}
	for _, want := range []string{"name: " + name, "kubernetesVersion: v1.35.5", "ETCD_QUOTA_BACKEND_BYTES", "maxRequestsInflight: 1600"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("kops get cluster lacks %q:\n%s", want, out)
		}
	}
	out, err = exec.Command(kops, "get", "ig", "--state", state, "--name", name).CombinedOutput()
	if err != nil {
		t.Fatalf("kops get ig: %v\n%s", err, out)
	}
	for _, ig := range []string{"control-plane-us-east-1a", "control-plane-us-east-1b", "control-plane-us-east-1c", "general", "highmem", "gpu-training"} {
		if !strings.Contains(string(out), ig) {
			t.Errorf("kops get ig lacks %s:\n%s", ig, out)
		}
	}
}

func TestDiffAfterCreateWithFakeAWS(t *testing.T) {
	noAWS(t)
	state := "file://" + filepath.Join(t.TempDir(), "state")
	def := "../../clusters/prod-us-east-1.yaml" // kops's fake cannot apply staging's warm pool
	code, out, stderr := run(t, "cluster", "create", "-f", def, "--state", state, "--fake-aws")
	if code != 0 || !strings.Contains(out, "Plan only: nothing was written") || !strings.Contains(out, "--state "+state+" --yes") {
		t.Fatalf("plan: exit %d\n%s\n%s", code, out, stderr)
	}
	if _, err := os.Stat(strings.TrimPrefix(state, "file://")); !os.IsNotExist(err) {
		t.Fatalf("the plan wrote to the state store: %v", err)
	}
	code, out, stderr = run(t, "cluster", "create", "-f", def, "--state", state, "--fake-aws", "--yes")
	if code != 0 || !strings.Contains(out, "applied.") {
		t.Fatalf("create --yes after the plan: exit %d\n%s\n%s", code, out, stderr)
	}
	code, out, stderr = run(t, "cluster", "diff", "-f", def, "--state", state, "--fake-aws")
	if code != 0 || !strings.Contains(out, "Spec: no changes.") {
		t.Fatalf("diff: exit %d\n%s\n%s", code, out, stderr)
	}
	// Without credentials or --fake-aws, diff refuses instead of calling AWS.
	code, _, stderr = run(t, "cluster", "diff", "-f", def, "--state", state)
	if code == 0 || !strings.Contains(stderr, "no AWS credentials") {
		t.Fatalf("diff without AWS: exit %d, %s", code, stderr)
	}
}

func TestIntegrationValidateJSON(t *testing.T) {
	cp := cluster.Start(t, cluster.Options{})
	noAWS(t)
	code, out, stderr := run(t, "cluster", "validate", "-f", "../../clusters/local.yaml", "--kubeconfig", cp.Kubeconfig, "-o", "json")
	if code != cli.ExitInvalid {
		t.Fatalf("exit %d, want %d (invalid): %s", code, cli.ExitInvalid, stderr)
	}
	var r health.Result
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, out)
	}
	if r.Valid || r.Cluster != "trellis-local" || len(r.Groups) != 2 || len(r.Failures) == 0 {
		t.Errorf("unexpected result: %+v", r)
	}
}
