package definition

import (
	"path/filepath"
	"strings"
	"testing"
)

// group is the base's general group with extra lines, in the cluster file
// (groups merge by name).
func group(lines string) func(string) string {
	return func(s string) string {
		return s + "instanceGroups:\n- name: general\n" + lines
	}
}

func TestInstanceSettingsRefused(t *testing.T) {
	cases := []struct {
		name  string
		patch func(string) string
		want  string
	}{
		{"spot percentage over 100", group("  mixedInstances: {instances: [m6i.large, m6a.large], onDemandAboveBase: 120}\n"),
			`instanceGroups[0].mixedInstances.onDemandAboveBase: Invalid value: 120: a percentage: 0 to 100`},
		{"mixed instances without types", group("  mixedInstances: {onDemandBase: 1}\n"),
			`instanceGroups[0].mixedInstances.instances: Required value`},
		{"unknown spot strategy", group("  mixedInstances: {instances: [m6i.large], spotAllocationStrategy: cheapest}\n"),
			`instanceGroups[0].mixedInstances.spotAllocationStrategy: Unsupported value: "cheapest"`},
		{"requirements without bounds", group("  mixedInstances: {instanceRequirements: {excluded: [t3*]}}\n"),
			`instanceGroups[0].mixedInstances.instanceRequirements: Required value: cpu or memory bounds`},
		{"requirements max below min", group("  mixedInstances: {instanceRequirements: {memory: {min: 16Gi, max: 8Gi}}}\n"),
			`instanceGroups[0].mixedInstances.instanceRequirements.memory.max: Invalid value: "8Gi": below min (16Gi)`},
		{"warm pool larger than max size", group("  warmPool: {minSize: 5}\n"),
			`instanceGroups[0].warmPool: Invalid value: "minSize 5": a warm pool larger than the group's maxSize (3)`},
		{"warm pool max below min", group("  warmPool: {minSize: 2, maxSize: 1}\n"),
			`instanceGroups[0].warmPool.maxSize: Invalid value: 1: must be at least the warm pool's minSize (2)`},
		{"hop limit 0", func(s string) string { return s + "instanceDefaults:\n  instanceMetadata: {hopLimit: 0}\n" },
			`instanceDefaults.instanceMetadata.hopLimit: Invalid value: 0: must be 1 to 64`},
		{"tokens neither required nor optional", group("  instanceMetadata: {httpTokens: sometimes}\n"),
			`instanceGroups[0].instanceMetadata.httpTokens: Unsupported value: "sometimes"`},
		{"arm64 machine type in an amd64 group", group("  machineType: m7g.large\n"),
			`instanceGroups[0].machineType: Invalid value: "m7g.large": an arm64 machine type in a group whose architecture is amd64: add ` + "`architecture: arm64`" + ` to the group`},
		{"x86 type in an arm64 group's mix", group("  architecture: arm64\n  machineType: m7g.large\n  mixedInstances: {instances: [m7g.large, m6i.large]}\n"),
			`instanceGroups[0].mixedInstances.instances[1]: Invalid value: "m6i.large": an amd64 machine type in a group whose architecture is arm64: use arm64 machine types only`},
		{"arm64 label in a group without architecture", group("  labels: {kubernetes.io/arch: arm64}\n"),
			`instanceGroups[0].labels[kubernetes.io/arch]: Invalid value: "arm64": the group's architecture is amd64: add ` + "`architecture: arm64`" + ` to the group`},
		{"unknown architecture", group("  architecture: riscv64\n"),
			`instanceGroups[0].architecture: Unsupported value: "riscv64"`},
		{"iops on gp2", group("  rootVolume: {type: gp2, iops: 4000}\n"),
			`instanceGroups[0].rootVolume.iops: Invalid value: 4000: only gp3, io1 and io2 volumes take iops`},
		{"unknown volume type", func(s string) string { return s + "controlPlane:\n  rootVolume: {type: ssd}\n" },
			`controlPlane.rootVolume.type: Unsupported value: "ssd"`},
		{"lifetime under a day", group("  maxInstanceLifetime: 2h\n"),
			`instanceGroups[0].maxInstanceLifetime: Invalid value: "2h": must be 0 or 24h to 8760h`},
		{"bad reserved quantity", group("  kubelet: {systemReserved: {memory: lots}}\n"),
			`instanceGroups[0].kubelet.systemReserved[memory]: Invalid value: "lots": not a quantity`},
		{"reserved tag key", group("  cloudLabels: {\"aws:owner\": me}\n"),
			`instanceGroups[0].cloudLabels[aws:owner]: Invalid value: "aws:owner": a tag key of 1 to 128 characters, not starting with aws:`},
		{"max pods 0", group("  kubelet: {maxPods: 0}\n"),
			`instanceGroups[0].kubelet.maxPods: Invalid value: 0: must be 1 to 1000`},
		{"more pods than the instance type has addresses", group("  machineType: m6i.large\n  kubelet: {maxPods: 50}\n"),
			`instanceGroups[0].kubelet.maxPods: Invalid value: 50: at most 29: every pod takes a VPC address, and m6i.large holds 27 (3 ENIs x 10 addresses)`},
		{"more pods than the smallest mixed type has", group("  machineType: m6i.xlarge\n  mixedInstances: {instances: [m6i.xlarge, t3.medium]}\n  kubelet: {maxPods: 58}\n"),
			`instanceGroups[0].kubelet.maxPods: Invalid value: 58: at most 17: every pod takes a VPC address, and t3.medium holds 15`},
		{"unknown instance type", group("  machineType: m99.large\n"),
			`instanceGroups[0].machineType: Invalid value: "m99.large": instance type "m99.large" is not in the EC2 instance-type table`},
		{"eviction signal without threshold", group("  kubelet: {evictionHard: memory.available}\n"),
			`instanceGroups[0].kubelet.evictionHard: Invalid value: "memory.available": a signal<threshold list`},
		{"misspelled field", group("  rootVolume: {sise: 10}\n"),
			`instanceGroups[0].rootVolume.sise: unknown field "sise" (did you mean "size"?)`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := writeFiles(t, map[string]string{"base.yaml": testBase, "c.yaml": tc.patch(testCluster)})
			_, err := Load(filepath.Join(dir, "c.yaml"))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("want an error containing\n  %s\ngot\n  %v", tc.want, err)
			}
			if !strings.Contains(err.Error(), "c.yaml:") {
				t.Errorf("the error names no line of c.yaml: %v", err)
			}
		})
	}
}

// TestInstanceDefaultsFillGroups: instanceDefaults reach every group and
// the control plane; a group's own field wins, field by field.
func TestInstanceDefaultsFillGroups(t *testing.T) {
	dir := writeFiles(t, map[string]string{"base.yaml": testBase + "instanceDefaults:\n  instanceMetadata: {httpTokens: required, hopLimit: 1}\n  rootVolume: {type: gp3, size: 64, encrypted: true}\n",
		"c.yaml": testCluster + "instanceGroups:\n- name: general\n  rootVolume: {size: 200}\n"})
	l, err := Load(filepath.Join(dir, "c.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	m, v := l.Instances(l.InstanceGroups[0].InstanceMetadata, l.InstanceGroups[0].RootVolume)
	if m.HTTPTokens != "required" || *m.HopLimit != 1 || v.Type != "gp3" || *v.Size != 200 || !*v.Encrypted {
		t.Errorf("group: metadata %+v, volume %+v; want the defaults with size 200", m, v)
	}
	if *l.InstanceGroups[0].RootVolume.Size != 200 || l.InstanceGroups[0].RootVolume.Type != "" {
		t.Errorf("the definition itself changed: %+v", l.InstanceGroups[0].RootVolume)
	}
	if _, v := l.Instances(l.ControlPlane.InstanceMetadata, l.ControlPlane.RootVolume); *v.Size != 64 {
		t.Errorf("control plane volume %+v, want the defaults", v)
	}
}

func TestMachineArchitecture(t *testing.T) {
	for typ, want := range map[string]string{
		"m7g.4xlarge": ArchARM64, "c7gn.large": ArchARM64, "r6gd.xlarge": ArchARM64, "t4g.micro": ArchARM64, "g5g.xlarge": ArchARM64,
		"m6i.large": ArchAMD64, "m6a.large": ArchAMD64, "g5.xlarge": ArchAMD64, "p4d.24xlarge": ArchAMD64, "m5.large": ArchAMD64,
		"lots": "",
	} {
		if got := MachineArchitecture(typ); got != want {
			t.Errorf("%s: %q, want %q", typ, got, want)
		}
	}
}
