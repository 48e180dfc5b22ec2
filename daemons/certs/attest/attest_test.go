package attest

import (
	"errors"
	"strings"
	"testing"
)

func TestPodUIDFromCgroups(t *testing.T) {
	for _, tc := range []struct {
		name, content, want string
		err                 error  // a sentinel the error must match
		errHas              string // or what the error must say
	}{
		{name: "cgroupfs v1", content: "12:pids:/kubepods/burstable/pod2c48913c-b29f-11e7-9350-020968147796/9bca8d63d5fa610783847915bcff0ecac1273e5b4bed3f6fa1b07350e0135961\n11:memory:/kubepods/burstable/pod2c48913c-b29f-11e7-9350-020968147796/9bca8d63d5fa\n", want: "2c48913c-b29f-11e7-9350-020968147796"},
		{name: "systemd v1", content: "1:name=systemd:/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod2c48913c_b29f_11e7_9350_020968147796.slice/cri-containerd-9bca8d63.scope\n", want: "2c48913c-b29f-11e7-9350-020968147796"},
		{name: "guaranteed cgroup v2", content: "0::/kubepods.slice/kubepods-pod2c48913c_b29f_11e7_9350_020968147796.slice/cri-containerd-abc.scope\n", want: "2c48913c-b29f-11e7-9350-020968147796"},
		{name: "kind node nests kubepods", content: "0::/system.slice/docker-1234.scope/kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-burstable.slice/kubelet-kubepods-burstable-pod2c48913c_b29f_11e7_9350_020968147796.slice/cri-containerd-1.scope\n", want: "2c48913c-b29f-11e7-9350-020968147796"},
		{name: "host process", content: "12:pids:/system.slice/sshd.service\n0::/user.slice\n", err: ErrNotAPod},
		{name: "pod-like name inside a longer word", content: "0::/mypod2c48913c-b29f-11e7-9350-020968147796x/abc\n", err: ErrNotAPod},
		{name: "two pods", content: "12:pids:/kubepods/pod2c48913c-b29f-11e7-9350-020968147796/a\n11:memory:/kubepods/pod3c48913c-b29f-11e7-9350-020968147796/a\n", errHas: "two pods"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := PodUIDFromCgroups([]byte(tc.content))
			switch {
			case tc.errHas != "":
				if err == nil || !strings.Contains(err.Error(), tc.errHas) {
					t.Fatalf("got %q, err %v; want an error saying %q", got, err, tc.errHas)
				}
			case tc.err != nil:
				if !errors.Is(err, tc.err) {
					t.Fatalf("err = %v, want %v", err, tc.err)
				}
			case err != nil:
				t.Fatal(err)
			case string(got) != tc.want:
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func FuzzPodUIDFromCgroups(f *testing.F) {
	f.Add([]byte("12:pids:/kubepods/burstable/pod2c48913c-b29f-11e7-9350-020968147796/9b\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		uid, err := PodUIDFromCgroups(b)
		if err == nil && len(uid) != 36 {
			t.Fatalf("uid %q of length %d", uid, len(uid))
		}
	})
}
