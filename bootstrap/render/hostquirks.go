package render

import (
	"os"
	"strconv"
	"strings"
)

// capSysResource is CAP_SYS_RESOURCE's bit: without it a process (and the
// containers it starts) cannot lower OOM score adjustments below zero.
const capSysResource = 24

// DetectHostQuirks reads, without changing anything, what this machine
// needs local cluster nodes to be configured around.
func DetectHostQuirks() HostQuirks {
	var q HostQuirks
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err != nil {
		q.CgroupV1 = true
	}
	if b, err := os.ReadFile("/proc/self/status"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "CapBnd:"); ok {
				caps, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
				q.NoNegativeOOMScoreAdj = err == nil && caps&(1<<capSysResource) == 0
			}
		}
	}
	return q
}
