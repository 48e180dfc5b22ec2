package zk_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/trellis-dev/trellis/cli"
	"github.com/trellis-dev/trellis/internal/serverset"
	zktest "github.com/trellis-dev/trellis/internal/testutil/zookeeper"
)

func TestIntegrationServersetCommand(t *testing.T) {
	zks := zktest.Start(t, 1)
	r := serverset.New(serverset.Config{Servers: zks.Addrs(), SessionTimeout: 4 * time.Second})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = r.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	if err := r.Set("p", serverset.Registration{Service: "web", Env: "prod", Member: serverset.Member{ServiceEndpoint: serverset.Endpoint{Host: "10.7.0.1", Port: 8080}}}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		var out, errb bytes.Buffer
		code := cli.Main(context.Background(), []string{"zk", "serverset", "web", "prod", "--zookeeper", zks.Addrs()[0]}, cli.Streams{In: strings.NewReader(""), Out: &out, Err: &errb})
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errb.String())
		}
		var ms []serverset.Member
		if err := json.Unmarshal(out.Bytes(), &ms); err != nil {
			t.Fatalf("output %q: %v", out.String(), err)
		}
		if len(ms) == 1 && ms[0].ServiceEndpoint.Host == "10.7.0.1" {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatal("serverset never listed the member")
}
