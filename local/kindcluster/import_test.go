package kindcluster

import (
	"strings"
	"testing"
)

func TestSnapshotter(t *testing.T) {
	for _, tc := range []struct{ name, config, want, err string }{
		{"v2", "version = 2\n[plugins.\"io.containerd.grpc.v1.cri\".containerd]\n  snapshotter = \"overlayfs\"\n", "overlayfs", ""},
		{"v3", "version = 3\n[plugins.'io.containerd.cri.v1.images']\n  snapshotter = 'native'\n", "native", ""},
		{"no snapshotter", "version = 3\n", "", "has no plugins.io.containerd.cri.v1.images.snapshotter"},
		{"unknown version", "version = 9\n", "", "version 9"},
		{"not toml", "version = = 2", "", "parse the containerd config"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := snapshotter(tc.config)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one naming %q", err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("snapshotter = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}
