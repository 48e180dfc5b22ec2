// Package attest finds which pod a local process belongs to, the way
// SPIRE's Kubernetes workload attestor does: the peer credentials of a Unix
// socket give the caller's PID, /proc/<pid>/cgroup gives its cgroups, and
// the kubelet names every pod's cgroup after the pod's UID.
package attest

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"golang.org/x/sys/unix"
	"k8s.io/apimachinery/pkg/types"
)

// ErrNotAPod means the process is not in a pod's cgroup (a host process).
var ErrNotAPod = errors.New("process is not in a pod's cgroup")

// podUID matches the pod element of a cgroup path in both kubelet cgroup
// drivers: cgroupfs ("/kubepods/burstable/pod<uid>/<container>") and
// systemd ("/kubepods.slice/kubepods-burstable.slice/
// kubepods-burstable-pod<uid with _>.slice/cri-containerd-<id>.scope").
var podUID = regexp.MustCompile(`(?:^|/|-)pod([0-9a-f]{8}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{12})(?:\.slice)?(?:/|$)`)

// PodUIDFromCgroups returns the pod UID named by the cgroup paths of a
// process (the content of /proc/<pid>/cgroup). It fails when the paths name
// no pod (ErrNotAPod) or disagree about which pod.
func PodUIDFromCgroups(content []byte) (types.UID, error) {
	var found types.UID
	sc := bufio.NewScanner(bytes.NewReader(content))
	for sc.Scan() {
		// hierarchy-ID:controller-list:cgroup-path
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		ms := podUID.FindAllStringSubmatch(parts[2], -1)
		for _, m := range ms {
			uid := types.UID(strings.ReplaceAll(m[1], "_", "-"))
			if found != "" && found != uid {
				return "", fmt.Errorf("cgroups name two pods, %s and %s", found, uid)
			}
			found = uid
		}
	}
	if found == "" {
		return "", ErrNotAPod
	}
	return found, nil
}

// PodUIDOfPID reads /proc/<pid>/cgroup under procRoot (usually "/proc"; an
// agent in a pod mounts the host's /proc and runs with hostPID).
func PodUIDOfPID(procRoot string, pid int32) (types.UID, error) {
	b, err := os.ReadFile(filepath.Join(procRoot, fmt.Sprint(pid), "cgroup"))
	if err != nil {
		return "", fmt.Errorf("failed to read the cgroups of pid %d: %w", pid, err)
	}
	return PodUIDFromCgroups(b)
}

// PeerPID returns the PID of the process on the other end of a Unix socket
// connection (SO_PEERCRED: the kernel's word, not the caller's).
func PeerPID(c net.Conn) (int32, error) {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return 0, fmt.Errorf("not a unix socket connection: %T", c)
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return 0, fmt.Errorf("get the raw socket: %w", err)
	}
	var cred *unix.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return 0, fmt.Errorf("read the peer credentials: %w", err)
	}
	if credErr != nil {
		return 0, fmt.Errorf("failed to read peer credentials: %w", credErr)
	}
	return cred.Pid, nil
}
