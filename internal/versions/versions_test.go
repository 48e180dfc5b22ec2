package versions

import (
	"bufio"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/blang/semver/v4"
	"github.com/google/go-cmp/cmp"
)

func TestVersionsEnv(t *testing.T) {
	m, err := Parse(env)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"K8S_VERSION", "ETCD_VERSION", "COREDNS_VERSION", "KOPS_VERSION", "KWOK_VERSION"} {
		if _, err := semver.Parse(strings.TrimPrefix(m[k], "v")); err != nil || !strings.HasPrefix(m[k], "v") {
			t.Errorf("%s=%q is not a release such as v1.2.3", k, m[k])
		}
	}
	k8s := semver.MustParse(strings.TrimPrefix(Kubernetes, "v"))
	if k8s.LT(MinKubernetes) || k8s.GT(MaxKubernetes) {
		t.Errorf("K8S_VERSION %s is outside the supported minors %s to %s", Kubernetes, m["K8S_MIN_SUPPORTED"], m["K8S_MAX_SUPPORTED"])
	}
}

// TestGoMod: the versions that must be go.mod's are.
func TestGoMod(t *testing.T) {
	req := goModRequires(t, "../../go.mod")
	if req["k8s.io/kops"] != Kops {
		t.Errorf("KOPS_VERSION is %s, go.mod requires k8s.io/kops %s", Kops, req["k8s.io/kops"])
	}
	kops := semver.MustParse(strings.TrimPrefix(Kops, "v"))
	if MaxKubernetes.Major != kops.Major || MaxKubernetes.Minor != kops.Minor {
		t.Errorf("K8S_MAX_SUPPORTED is %d.%d, the pinned kops %s manages %d.%d", MaxKubernetes.Major, MaxKubernetes.Minor, Kops, kops.Major, kops.Minor)
	}
	// k8s.io/api, apimachinery, client-go ... are v0.<minor>.<patch> of
	// Kubernetes v1.<minor>.<patch>.
	k8sMinor := semver.MustParse(strings.TrimPrefix(Kubernetes, "v")).Minor
	n := 0
	for path, v := range req {
		if !strings.HasPrefix(path, "k8s.io/") || !strings.HasPrefix(v, "v0.") || strings.Contains(v, "-") {
			continue // kops, klog, utils, kube-openapi: versioned on their own
		}
		n++
		if got := semver.MustParse(strings.TrimPrefix(v, "v")).Minor; got != k8sMinor {
			t.Errorf("K8S_VERSION is %s, go.mod requires %s %s (minor %d)", Kubernetes, path, v, got)
		}
	}
	if n == 0 {
		t.Errorf("go.mod requires no k8s.io/* module of a Kubernetes release: is it the module's?")
	}
}

// goModRequires reads the require lines of a go.mod: module path to
// version.
func goModRequires(t *testing.T, name string) map[string]string {
	t.Helper()
	f, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	req := map[string]string{}
	inBlock := false
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(strings.SplitN(s.Text(), "//", 2)[0])
		switch {
		case len(fields) == 2 && fields[0] == "require" && fields[1] == "(":
			inBlock = true
		case inBlock && len(fields) == 1 && fields[0] == ")":
			inBlock = false
		case inBlock && len(fields) == 2:
			req[fields[0]] = fields[1]
		case len(fields) == 3 && fields[0] == "require":
			req[fields[1]] = fields[2]
		}
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	return req
}

// TestShell: hack/lib/versions.sh reads the file as Go does, and the
// environment wins.
func TestShell(t *testing.T) {
	keys := make([]string, 0, len(all))
	for k := range all {
		keys = append(keys, k)
	}
	script := `. ../../hack/lib/versions.sh; for k in "$@"; do echo "$k=${!k}"; done`
	run := func(env ...string) map[string]string {
		cmd := exec.Command("bash", append([]string{"-c", script, "bash"}, keys...)...)
		cmd.Env = append([]string{"PATH=" + os.Getenv("PATH")}, env...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		got, err := Parse(string(out))
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	if diff := cmp.Diff(All(), run()); diff != "" {
		t.Errorf("hack/lib/versions.sh (-go +shell):\n%s", diff)
	}
	want := All()
	want["K8S_VERSION"] = "v1.99.0"
	if diff := cmp.Diff(want, run("K8S_VERSION=v1.99.0")); diff != "" {
		t.Errorf("hack/lib/versions.sh with K8S_VERSION in the environment (-want +got):\n%s", diff)
	}
}

func TestParse(t *testing.T) {
	for _, in := range []string{
		"K8S_VERSION",
		"K8S_VERSION=",
		"k8s_version=v1",
		"K8S_VERSION = v1",
		"K8S_VERSION=\"v1\"",
		"K8S_VERSION=v1\nK8S_VERSION=v2",
	} {
		if _, err := Parse(in); err == nil {
			t.Errorf("Parse(%q) accepted it", in)
		}
	}
	got, err := Parse("# comment\n\nA=v1\nB_2=x=y\n")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]string{"A": "v1", "B_2": "x=y"}, got); diff != "" {
		t.Error(diff)
	}
}

func TestMinors(t *testing.T) {
	first, last, err := Minors("1.34", "1.36")
	if err != nil {
		t.Fatal(err)
	}
	for v, in := range map[string]bool{"1.33.9": false, "1.34.0": true, "1.36.0": true, "1.36.250": true, "1.37.0": false} {
		sv := semver.MustParse(v)
		if got := !sv.LT(first) && !sv.GT(last); got != in {
			t.Errorf("%s in 1.34 to 1.36: %v, want %v", v, got, in)
		}
	}
	for _, r := range [][2]string{{"1.36", "1.34"}, {"1.34.0", "1.36"}, {"1", "1.36"}, {"1.34", "x"}} {
		if _, _, err := Minors(r[0], r[1]); err == nil {
			t.Errorf("Minors(%q, %q) accepted them", r[0], r[1])
		}
	}
}
