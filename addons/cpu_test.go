package addons

import "testing"

func TestCPU(t *testing.T) {
	for _, tc := range []struct {
		in    string
		token bool
		want  string
	}{
		{"200m", false, "200m"},
		{"1", false, "1"},
		{"200m", true, "20m"},
		{"100m", true, "10m"},
		{"50m", true, "10m"},
		{"10m", true, "10m"},
		{"1", true, "100m"},
		{"1500m", true, "150m"},
	} {
		got, err := Values{TokenCPU: tc.token}.CPU(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("CPU(%q) token=%v = %q, %v; want %q", tc.in, tc.token, got, err, tc.want)
		}
	}
	if _, err := (Values{}).CPU("lots"); err == nil {
		t.Error(`CPU("lots") gave no error`)
	}
}
