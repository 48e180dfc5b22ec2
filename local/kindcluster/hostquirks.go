package kindcluster

import (
	"os"

	"github.com/trellis-dev/trellis/bootstrap/render"
	"github.com/trellis-dev/trellis/local/runcshim"
)

// DetectHostQuirks reads, without changing anything, what this machine
// needs local cluster nodes to be configured around (render.ToKind takes
// the result).
func DetectHostQuirks() render.HostQuirks {
	var q render.HostQuirks
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err != nil {
		q.CgroupV1 = true
	}
	// Without CAP_SYS_RESOURCE no process (nor the containers it starts)
	// may lower an OOM score adjustment below zero.
	q.NoNegativeOOMScoreAdj, _ = runcshim.Needed()
	return q
}
