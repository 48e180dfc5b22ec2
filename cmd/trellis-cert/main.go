// Command trellis-cert is the certificate sidecar injected into every pod
// with an identity: run, once (init container) and check (startup probe).
package main

import (
	"os"

	"github.com/trellis-dev/trellis/sidecars/certs"
)

func main() {
	os.Exit(certs.Main(os.Args[1:], os.Stderr))
}
