package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/trellis-dev/trellis/bootstrap/rollout"
)

// instanceLabel marks the nodes awsloop/nodeprovider makes of instances.
const instanceLabel = "trellis.dev/instance-id"

// localAWS is a `trellis local aws` child process.
type localAWS struct {
	cmd *exec.Cmd
	url string
	log string
}

// startLocalAWS runs `trellis local aws` on a free loopback port, its
// output in a file under dir.
func startLocalAWS(o options, dir string) (*localAWS, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	log := filepath.Join(dir, "local-aws.log")
	f, err := os.Create(log)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	cmd := exec.Command(o.trellis, "local", "aws", "-f", o.file, "--kubeconfig", o.kubeconfig, "--port", strconv.Itoa(port),
		"--env-file", filepath.Join(dir, "env"), "--node-logs", filepath.Join(dir, "node-logs"))
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return &localAWS{cmd: cmd, url: fmt.Sprintf("http://127.0.0.1:%d", port), log: log}, nil
}

// stop interrupts it (it removes its instance nodes) and waits.
func (l *localAWS) stop() {
	_ = l.cmd.Process.Signal(os.Interrupt)
	done := make(chan struct{})
	go func() { _ = l.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(3 * time.Minute):
		_ = l.cmd.Process.Kill()
		<-done
	}
}

// awaitEmulator waits for the emulator to answer.
func (l *localAWS) awaitEmulator(ctx context.Context) error {
	return wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(context.Context) (bool, error) {
		if l.cmd.ProcessState != nil {
			return false, fmt.Errorf("trellis local aws exited: see %s", l.log)
		}
		resp, err := http.Get(l.url + "/moto-api/")
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
}

// awaitNodes waits until n instance nodes are Ready with the runtime (the
// rollout engine's own gate).
func awaitNodes(ctx context.Context, kc kubernetes.Interface, n int, log string) error {
	ctx, cancel := context.WithCancel(ctx) // ends the gate's informers
	defer cancel()
	kube, err := rollout.NewKubeCluster(ctx, kc)
	if err != nil {
		return err
	}
	var last string
	err = wait.PollUntilContextTimeout(ctx, 2*time.Second, 15*time.Minute, true, func(ctx context.Context) (bool, error) {
		nodes, err := kc.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: instanceLabel})
		if err != nil {
			return false, err
		}
		ready := 0
		for i := range nodes.Items {
			ok, why, err := kube.Ready(ctx, &nodes.Items[i])
			if err != nil {
				return false, err
			}
			if ok {
				ready++
			} else {
				last = nodes.Items[i].Name + ": " + why
			}
		}
		last = fmt.Sprintf("%d of %d instance nodes ready (%s)", ready, n, last)
		return ready == n && len(nodes.Items) == n, nil
	})
	if err != nil {
		return fmt.Errorf("instance nodes: %s: %w (trellis local aws: %s)", last, err, log)
	}
	return nil
}
