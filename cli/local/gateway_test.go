package local

import (
	"bytes"
	"testing"

	"github.com/trellis-dev/trellis/internal/testutil/golden"
	trellislocal "github.com/trellis-dev/trellis/local"
)

func TestPrintGateway(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	printGateway(&b, trellislocal.ContextFiles("/home/dev/.config/trellis/context.yaml", "local"))
	golden.Assert(t, "testdata/gateway.txt", b.Bytes())
}

func TestPrintConsole(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	printConsole(&b, trellislocal.ConsoleAccess{
		URL: "https://172.18.0.2:30443/console/", User: trellislocal.ConsoleUser, PasswordFile: "/home/dev/.config/trellis/local-console-dev.password",
		Guest: trellislocal.ConsoleGuest, GuestPasswordFile: "/home/dev/.config/trellis/local-console-guest.password",
	})
	golden.Assert(t, "testdata/console.txt", b.Bytes())
}
