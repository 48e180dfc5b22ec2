// Command trellis-runc is registered as dockerd's default runtime on hosts
// whose capability bounding set lacks CAP_SYS_RESOURCE: it drops that
// capability from what runc is about to run (see local/runcshim), then
// executes the real runc ($TRELLIS_RUNC or /usr/sbin/runc).
package main

import (
	"fmt"
	"os"
	"syscall"

	"github.com/trellis-dev/trellis/local/runcshim"
)

func main() {
	if err := runcshim.Rewrite(os.Args[1:]); err != nil {
		fmt.Fprintf(os.Stderr, "trellis-runc: %v\n", err)
		os.Exit(1)
	}
	runc := os.Getenv("TRELLIS_RUNC")
	if runc == "" {
		runc = "/usr/sbin/runc"
	}
	err := syscall.Exec(runc, append([]string{runc}, os.Args[1:]...), os.Environ())
	fmt.Fprintf(os.Stderr, "trellis-runc: exec %s: %v\n", runc, err)
	os.Exit(1)
}
