package enilimits

import "testing"

func TestLookup(t *testing.T) {
	for _, c := range []struct {
		name    string
		l       Limits
		maxPods int
		arch    string
	}{
		{"t3.medium", Limits{3, 6}, 17, "x86_64"},
		{"m5.large", Limits{3, 10}, 29, "x86_64"},
		{"m6g.large", Limits{3, 10}, 29, "arm64"},
		{"c5.4xlarge", Limits{8, 30}, 110, "x86_64"}, // 234 by ENIs: the kubelet's 110 caps it
	} {
		ty, ok := Lookup(c.name)
		if !ok || ty.Limits != c.l || ty.Limits.MaxPods() != c.maxPods || ty.Architectures[0] != c.arch {
			t.Errorf("%s: %+v (found %v), maxPods %d; want %+v, %d, %s", c.name, ty, ok, ty.Limits.MaxPods(), c.l, c.maxPods, c.arch)
		}
	}
	if _, ok := Lookup("m99.nonsense"); ok {
		t.Error("an unknown type was found")
	}
	all, err := All()
	if err != nil || len(all) < 500 {
		t.Fatalf("%d types (%v)", len(all), err)
	}
}
