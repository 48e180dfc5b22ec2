package definition

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

const testBase = `apiVersion: trellis.dev/v1alpha1
kind: ClusterDefinition
abstract: true
cloud: aws
controlPlane:
  machineType: m6i.large
  image: ami-0123456789abcdef0
instanceGroups:
- name: general
  machineType: m6i.large
  image: ami-0123456789abcdef0
  minSize: 1
  maxSize: 3
  zones: [us-east-1a]
`

const testCluster = `apiVersion: trellis.dev/v1alpha1
kind: ClusterDefinition
base: base.yaml
name: demo
region: us-east-1
zones: [us-east-1a]
kubernetesVersion: 1.36.1
network:
  vpcCIDR: 10.0.0.0/16
  podCIDR: 100.96.0.0/11
  serviceCIDR: 100.64.0.0/13
  subnets:
  - {zone: us-east-1a, private: 10.0.32.0/19, public: 10.0.0.0/22}
`

func writeFiles(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestLoadMergesBase(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"base.yaml": testBase,
		"demo.yaml": testCluster + `instanceGroups:
- name: general
  maxSize: 9
- name: batch
  machineType: c6i.large
  image: ami-0123456789abcdef0
  minSize: 0
  maxSize: 2
  zones: [us-east-1a]
`,
	})
	l, err := Load(filepath.Join(dir, "demo.yaml"))
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	var got []string
	for _, ig := range l.InstanceGroups {
		got = append(got, ig.Name+":"+ig.MachineType)
	}
	if diff := cmp.Diff([]string{"general:m6i.large", "batch:c6i.large"}, got); diff != "" {
		t.Errorf("instance groups (-want +got):\n%s", diff)
	}
	if *l.InstanceGroups[0].MaxSize != 9 || *l.InstanceGroups[0].MinSize != 1 {
		t.Errorf("general group: want min 1 (from base) max 9 (override), got %d/%d", *l.InstanceGroups[0].MinSize, *l.InstanceGroups[0].MaxSize)
	}
	if l.Abstract || l.Base != "base.yaml" {
		t.Errorf("abstract/base: got %v/%q", l.Abstract, l.Base)
	}
	if l.ControlPlane.Etcd.QuotaBackendBytes != DefaultEtcdQuotaBackendBytes {
		t.Errorf("etcd quota not defaulted: %d", l.ControlPlane.Etcd.QuotaBackendBytes)
	}
	if got, want := l.Source("instanceGroups[0].maxSize"), filepath.Join(dir, "demo.yaml")+":16:12"; got != want {
		t.Errorf("source of override: got %s want %s", got, want)
	}
	if got, want := l.Source("instanceGroups[0].minSize"), filepath.Join(dir, "base.yaml")+":12:12"; got != want {
		t.Errorf("source of inherited field: got %s want %s", got, want)
	}
}

// TestLoadReportsEverythingAtOnce is the acceptance case: a typo'd field, an
// out-of-VPC subnet and min > max in one file give one error naming all
// three with file and line.
func TestLoadReportsEverythingAtOnce(t *testing.T) {
	bad := strings.Replace(testCluster, "public: 10.0.0.0/22", "public: 10.9.0.0/22", 1) + `instanceGroups:
- name: general
  minSize: 5
  maxSize: 2
  machinType: m6i.large
`
	dir := writeFiles(t, map[string]string{"base.yaml": testBase, "bad.yaml": bad})
	file := filepath.Join(dir, "bad.yaml")
	_, err := Load(file)
	if !errors.Is(err, ErrInvalid) {
		t.Fatalf("want ErrInvalid, got %v", err)
	}
	var es Errors
	if !errors.As(err, &es) {
		t.Fatalf("want Errors, got %T", err)
	}
	want := []string{
		file + ":13:55: network.subnets[0].public: Invalid value: \"10.9.0.0/22\": subnet is outside the VPC 10.0.0.0/16",
		file + ":17:12: instanceGroups[0].maxSize: Invalid value: 2: must be at least minSize (5)",
		file + ":18:3: instanceGroups[0].machinType: unknown field \"machinType\" (did you mean \"machineType\"?)",
	}
	var got []string
	for _, e := range es {
		got = append(got, e.Error())
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("errors (-want +got):\n%s", diff)
	}
}

func TestValidationErrors(t *testing.T) {
	cases := []struct {
		name  string
		patch func(string) string
		want  string
	}{
		{"zone outside region", func(s string) string {
			return strings.Replace(s, "zones: [us-east-1a]", "zones: [us-east-1a, us-west-2a]", 1)
		},
			`zones[1]: Invalid value: "us-west-2a": zone is outside region us-east-1`},
		{"overlapping pod and vpc", func(s string) string { return strings.Replace(s, "100.96.0.0/11", "10.0.128.0/17", 1) },
			`network.podCIDR: Invalid value: "10.0.128.0/17": overlaps network.vpcCIDR (10.0.0.0/16)`},
		{"malformed version", func(s string) string { return strings.Replace(s, "1.36.1", "1.36", 1) },
			`kubernetesVersion: Invalid value: "1.36": not a full semantic version`},
		{"unsupported version", func(s string) string { return strings.Replace(s, "1.36.1", "1.30.2", 1) },
			`kubernetesVersion: Invalid value: "1.30.2": unsupported`},
		{"unknown addon", func(s string) string { return s + "addons:\n- name: istio\n" },
			`addons[0].name: Not found: "istio"`},
		{"group without zones", func(s string) string {
			return s + "instanceGroups:\n- name: general\n  zones: []\n"
		}, `instanceGroups[0].zones: Required value: a group needs at least one zone`},
		{"duplicate group", func(s string) string {
			return s + "instanceGroups:\n- name: extra\n  machineType: a\n  image: ami-0123456789abcdef0\n  minSize: 1\n  maxSize: 1\n  zones: [us-east-1a]\n- name: extra\n  machineType: a\n  image: ami-0123456789abcdef0\n  minSize: 1\n  maxSize: 1\n  zones: [us-east-1a]\n"
		}, `instanceGroups[2].name: Duplicate value: "extra"`},
		{"bad taint", func(s string) string {
			return s + "instanceGroups:\n- name: general\n  taints: [gpu]\n"
		}, `instanceGroups[0].taints[0]: Invalid value: "gpu"`},
		{"wrong type", func(s string) string { return strings.Replace(s, "region: us-east-1", "region: [a]", 1) },
			`region: expected a string, got a list`},
		{"not an integer", func(s string) string {
			return s + "instanceGroups:\n- name: general\n  minSize: lots\n"
		}, `instanceGroups[0].minSize: expected an integer (32-bit), got "lots"`},
		{"missing base", func(s string) string { return strings.Replace(s, "base.yaml", "nope.yaml", 1) },
			`base: base "nope.yaml" not found`},
		{"quota without its addon", func(s string) string { return s + "quota:\n  threshold: 0.9\n" },
			`quota: Forbidden: set, but the trellis-quota addon that runs the watch is not in addons`},
		{"quota watch settings", func(s string) string {
			return s + "addons:\n- name: trellis-quota\nquota:\n  schedule: hourly\n  prometheus: prometheus:9090\n  timeZone: Mars/Olympus\n  lead: two weeks\n  threshold: 80\n"
		}, "5 problem(s)"},
		{"quota schedule", func(s string) string { return s + "addons:\n- name: trellis-quota\nquota:\n  schedule: hourly\n" },
			`c.yaml:17:13: quota.schedule: Invalid value: "hourly": must be a cron schedule of five fields`},
		{"quota prometheus", func(s string) string {
			return s + "addons:\n- name: trellis-quota\nquota:\n  prometheus: prometheus:9090\n"
		},
			`quota.prometheus: Invalid value: "prometheus:9090": must be an http or https URL`},
		{"quota time zone", func(s string) string { return s + "addons:\n- name: trellis-quota\nquota:\n  timeZone: Mars/Olympus\n" },
			`quota.timeZone: Invalid value: "Mars/Olympus": unknown time zone Mars/Olympus`},
		{"quota lead", func(s string) string { return s + "addons:\n- name: trellis-quota\nquota:\n  lead: two weeks\n" },
			`quota.lead: Invalid value: "two weeks": must be a positive duration such as 336h`},
		{"quota threshold", func(s string) string { return s + "addons:\n- name: trellis-quota\nquota:\n  threshold: 80\n" },
			`quota.threshold: Invalid value: 80: must be a fraction of a quota, above 0 and at most 1`},
		{"fleet members even", func(s string) string { return s + "addons:\n- name: karmada-apiserver\n  values: {replicas: 2}\n" },
			`c.yaml:16:22: addons[0].values[replicas]: Invalid value: 2: must be 1, 3 or 5`},
		{"fleet members not a number", func(s string) string { return s + "addons:\n- name: karmada-apiserver\n  values: {replicas: three}\n" },
			`addons[0].values[replicas]: Invalid value: "three": must be 1, 3 or 5`},
		{"unknown addon value", func(s string) string { return s + "addons:\n- name: karmada-apiserver\n  values: {replica: 3}\n" },
			`addons[0].values[replica]: Unsupported value: "replica": supported values: "replicas"`},
		{"value of an addon that takes none", func(s string) string { return s + "addons:\n- name: trellis-quota\n  values: {replicas: 3}\n" },
			`addons[0].values[replicas]: Unsupported value: "replicas"`},
		{"quota threshold not a number", func(s string) string { return s + "addons:\n- name: trellis-quota\nquota:\n  threshold: most\n" },
			`quota.threshold: expected a number, got "most"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := writeFiles(t, map[string]string{"base.yaml": testBase, "c.yaml": tc.patch(testCluster)})
			_, err := Load(filepath.Join(dir, "c.yaml"))
			if err == nil {
				t.Fatalf("want an error containing %q, got none", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("want an error containing\n  %s\ngot\n  %v", tc.want, err)
			}
		})
	}
}

func TestShippedDefinitionsLoad(t *testing.T) {
	files, err := filepath.Glob("../../clusters/*.yaml")
	if err != nil || len(files) < 3 {
		t.Fatalf("want the shipped cluster definitions, got %v (%v)", files, err)
	}
	for _, f := range files {
		if _, err := Load(f); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}

func TestBaseCycle(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"a.yaml": "apiVersion: trellis.dev/v1alpha1\nkind: ClusterDefinition\nbase: b.yaml\n",
		"b.yaml": "apiVersion: trellis.dev/v1alpha1\nkind: ClusterDefinition\nbase: a.yaml\n",
	})
	_, err := Load(filepath.Join(dir, "a.yaml"))
	if err == nil || !strings.Contains(err.Error(), "cycle") {
		t.Fatalf("want a cycle error, got %v", err)
	}
}

// The fleet's API has 3 members on AWS unless the addon says otherwise,
// and 1 on kind, where more is refused.
func TestFleetReplicas(t *testing.T) {
	fleet := func(cloud Cloud, values map[string]any) *ClusterDefinition {
		return &ClusterDefinition{Cloud: cloud, Addons: []Addon{{Name: "zookeeper"}, {Name: FleetAPIAddon, Values: values}}}
	}
	for _, c := range []struct {
		d    *ClusterDefinition
		want int
	}{
		{fleet(CloudAWS, nil), 3},
		{fleet(CloudAWS, map[string]any{"replicas": float64(1)}), 1},
		{fleet(CloudAWS, map[string]any{"replicas": 5}), 5},
		{fleet(CloudKind, nil), 1},
		{&ClusterDefinition{Cloud: CloudAWS}, 3},
	} {
		if got := c.d.FleetReplicas(); got != c.want {
			t.Errorf("%s %v: %d members, want %d", c.d.Cloud, c.d.Addons, got, c.want)
		}
	}
	kind := fleet(CloudKind, map[string]any{"replicas": float64(3)})
	errs := validateAddonValues(kind, field.NewPath("addons").Index(1), kind.Addons[1])
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), "must be 1 on kind") {
		t.Errorf("3 members on kind: %v", errs)
	}
	// On AWS each member needs a node of its own: the groups' minimum
	// sizes count, but not a group whose taints keep the fleet off.
	aws := fleet(CloudAWS, map[string]any{"replicas": float64(3)})
	aws.InstanceGroups = []InstanceGroup{{Name: "a", MinSize: new(int32(2))}, {Name: "gpu", MinSize: new(int32(4)), Taints: []string{"gpu=true:NoSchedule"}}}
	errs = validateAddonValues(aws, field.NewPath("addons").Index(1), aws.Addons[1])
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), "needs at least 3 nodes") || !strings.Contains(errs[0].Error(), "sum to 2") {
		t.Errorf("3 members on 2 schedulable nodes: %v", errs)
	}
	aws.InstanceGroups = append(aws.InstanceGroups, InstanceGroup{Name: "b", MinSize: new(int32(1)), Taints: []string{"team=x:PreferNoSchedule"}})
	if errs := validateAddonValues(aws, field.NewPath("addons").Index(1), aws.Addons[1]); len(errs) != 0 {
		t.Errorf("3 members on 3 schedulable nodes: %v", errs)
	}
	// The default (3 on AWS) is held to the nodes as a set value is.
	dflt := fleet(CloudAWS, nil)
	dflt.InstanceGroups = []InstanceGroup{{Name: "a", MinSize: new(int32(2))}}
	errs = validateAddonValues(dflt, field.NewPath("addons").Index(1), dflt.Addons[1])
	if len(errs) != 1 || errs[0].Field != "addons[1].name" || !strings.Contains(errs[0].Error(), "3 fleet etcd members: needs at least 3 nodes") {
		t.Errorf("the default 3 members on 2 nodes: %v", errs)
	}
}
