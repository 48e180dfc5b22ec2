package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/trellis-dev/trellis/internal/controlplane"
)

// brokerMain is the `broker` subcommand: franz-go's kfake, a one-broker
// Kafka speaking the real protocol, in a process of its own so that its
// CPU is not counted as the shipper's. It runs until SIGTERM.
// kfake checks each produced batch's header and CRC but keeps it
// compressed: it does not decompress and validate the records as a Kafka
// broker does, so its CPU is a floor.
func brokerMain(args []string) error {
	fs := flag.NewFlagSet("broker", flag.ExitOnError)
	port := fs.Int("port", 0, "the port to listen on (127.0.0.1)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.Ports(*port), kfake.AllowAutoTopicCreation())
	if err != nil {
		return fmt.Errorf("start kfake on port %d: %w", *port, err)
	}
	defer c.Close()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	<-ctx.Done()
	return nil
}

// broker is the broker process seen from the bench.
type broker struct {
	addr string
	cmd  *exec.Cmd
}

// startBroker runs `self broker` pinned to cpu and waits until it accepts
// connections.
func startBroker(self string, cpu int) (*broker, error) {
	ports, err := controlplane.FreePorts(1)
	if err != nil {
		return nil, fmt.Errorf("pick the broker's port: %w", err)
	}
	b := &broker{addr: fmt.Sprintf("127.0.0.1:%d", ports[0])}
	b.cmd = dieWithBench(exec.Command("taskset", "-c", strconv.Itoa(cpu), self, "broker", "-port", strconv.Itoa(ports[0])))
	b.cmd.Stderr = os.Stderr
	if err := b.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start the broker: %w", err)
	}
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if c, err := net.Dial("tcp", b.addr); err == nil {
			c.Close()
			return b, nil
		}
	}
	b.stop()
	return nil, fmt.Errorf("the broker did not listen on %s within 30s", b.addr)
}

func (b *broker) pid() int { return b.cmd.Process.Pid }

func (b *broker) stop() {
	_ = b.cmd.Process.Signal(syscall.SIGTERM)
	_ = b.cmd.Wait()
}
