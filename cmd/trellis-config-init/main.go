// Command trellis-config-init is the config init container injected into
// every workload (see sidecars/configinit).
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/trellis-dev/trellis/api/wellknown"
	"github.com/trellis-dev/trellis/sidecars/configinit"
)

func main() {
	src := flag.String("src", wellknown.PathConfigSrc, "the workload's ConfigMap volume")
	dst := flag.String("dst", wellknown.PathConfig, "the shared config volume")
	flag.Parse()
	files, err := configinit.Render(*src, *dst, os.Getenv, os.Environ())
	if err != nil {
		fmt.Fprintf(os.Stderr, "trellis-config-init: %v\n", err)
		os.Exit(1)
	}
	fmt.Printf("trellis-config-init: wrote %s to %s\n", strings.Join(files, ", "), *dst)
}
