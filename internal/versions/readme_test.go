package versions

import (
	"os"
	"regexp"
	"testing"
)

// TestREADMENamesThePinnedVersions: where the README names the version of
// a pinned component, it is versions.env's, so the two never drift apart.
func TestREADMENamesThePinnedVersions(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		re       string
		want     string
		required bool // the README must name it
	}{
		{`Kubernetes (v\d+\.\d+\.\d+)`, Kubernetes, true},
		{`etcd (v\d+\.\d+\.\d+)`, Etcd, true},
		{`kops (v\d+\.\d+\.\d+)`, Kops, true},
		{`CoreDNS (v\d+\.\d+\.\d+)`, CoreDNS, true},
		{`kwok (v\d+\.\d+\.\d+)`, Kwok, false},
		{`Karmada (v\d+\.\d+\.\d+)`, Karmada, false},
	} {
		ms := regexp.MustCompile(c.re).FindAllStringSubmatch(string(b), -1)
		if c.required && len(ms) == 0 {
			t.Errorf("the README never names %s: the check would prove nothing", c.re)
		}
		for _, m := range ms {
			if m[1] != c.want {
				t.Errorf("README says %q; versions.env pins %s", m[0], c.want)
			}
		}
	}
}
