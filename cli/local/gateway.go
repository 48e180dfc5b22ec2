package local

import (
	"fmt"
	"io"

	trellislocal "github.com/trellis-dev/trellis/local"
)

// printGateway tells where the gateway context is and how to use it.
func printGateway(w io.Writer, f trellislocal.GatewayContextFiles) {
	fmt.Fprintf(w, "The submission gateway (trellis-gateway) is reachable from this host; its context is %s\n", f.Context)
	fmt.Fprintf(w, "(identity system:serviceaccount:%s:%s, token valid %s: run local up again to renew):\n", trellislocal.SampleNamespace, trellislocal.DevIdentity, trellislocal.DevTokenTTL)
	fmt.Fprintf(w, "  export TRELLIS_CONTEXT=%s\n  trellis submit -f app.yaml --dry-run\n  trellis workloads list\n", f.Context)
}

// printConsole tells where the web console is and who may sign in.
func printConsole(w io.Writer, c trellislocal.ConsoleAccess) {
	fmt.Fprintf(w, "The web console is at %s (its certificate is the gateway's pod identity, for %s: your browser asks you to accept it).\n", c.URL, trellislocal.GatewayServerName)
	fmt.Fprintf(w, "  sign in as %s, password in %s (may submit and read in namespace %s)\n", c.User, c.PasswordFile, trellislocal.SampleNamespace)
	fmt.Fprintf(w, "  or as %s, password in %s (RBAC allows it nothing)\n", c.Guest, c.GuestPasswordFile)
}
