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
