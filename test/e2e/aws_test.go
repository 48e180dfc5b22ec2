//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/trellis-dev/trellis/api/wellknown"
	bootdef "github.com/trellis-dev/trellis/bootstrap/definition"
	"github.com/trellis-dev/trellis/bootstrap/rollout"
	"github.com/trellis-dev/trellis/internal/awsemu"
)

const (
	awsDefinition = "clusters/local-aws.yaml"
	awsState      = "s3://trellis-state/clusters"
	awsCluster    = "local-aws.k8s.trellis.local"
	instanceLabel = "trellis.dev/instance-id"
	imageLabel    = "trellis.dev/image"
)

// awsShape is the definition the test runs and its instance node count:
// clusters/local-aws.yaml (general 2, batch 1) with E2E_AWS_FULL=1 (make
// e2e-aws), else the reduced form CI runs in `make e2e`: general 1, batch 1.
func awsShape(t *testing.T) (string, int) {
	t.Helper()
	def := filepath.Join(root, awsDefinition)
	if os.Getenv("E2E_AWS_FULL") != "" {
		return def, 3
	}
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "base"), 0o755); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(def)
	if err != nil {
		t.Fatal(err)
	}
	reduced := strings.Replace(string(data), "  minSize: 2\n", "  minSize: 1\n", 1)
	if reduced == string(data) {
		t.Fatalf("%s: no general group with minSize 2 to reduce", def)
	}
	base, err := os.ReadFile(filepath.Join(root, "clusters", "base", "platform.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "base", "platform.yaml"), base, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "local-aws.yaml"), []byte(reduced), 0o644); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, "local-aws.yaml"), 2
}

// TestAWSNodeRollout is the production path on real kubelets: `trellis
// local aws` creates clusters/local-aws in the AWS API emulator and makes
// its instances nodes of the local cluster; `trellis ami rollout --yes`
// replaces them with a new image while an independent watcher samples the
// service's Ready pods against its PDB, and the rollout process is killed
// with SIGKILL at seeded random moments (E2E_AWS_KILLS, default 1) and
// started again each time (by `ami resume`). Beside the watcher of web's
// Ready pods, one samples web's ZooKeeper serverset, and a
// wait-for-completion batch task must be left to finish on its cordoned
// node. Then a second rollout is paused after its canary, aborted and
// rolled back (nodeControls), and no line web's pods logged on a replaced
// node may be missing from what its log shipper delivered.
// E2E_AWS_FULL=1 runs the full shape (3 nodes).
func TestAWSNodeRollout(t *testing.T) {
	ctx := context.Background()
	def, awsNodes := awsShape(t)
	emulator, env, nodeLogs := startLocalAWS(t, def)
	old := awaitInstanceNodes(t, awsNodes, "")
	t.Logf("instance nodes Ready with the runtime: %v", old)

	ns := fmt.Sprintf("e2e-aws-%d", time.Now().Unix())
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	web := trellisService(ns, "web", "general", false)
	web.Spec.Replicas = new(int32(3))
	minAvailable := intstr.FromInt32(2)
	web.Spec.MinAvailable = &minAvailable
	// Numbered log lines, and a final one on SIGTERM: the shipped logs of
	// every web pod drained off an old node must hold them all.
	web.Spec.Template.Containers[0].Args = append(web.Spec.Template.Containers[0].Args, "--tick=200ms")
	// Every web pod that ever runs, from the API: the logs of each one
	// drained off an old node are checked in the end.
	recorder := recordPods(t, ns, "web")
	if err := cl.Create(ctx, web); err != nil {
		t.Fatal(err)
	}
	eventually(t, "3 Ready pods of web", 4*time.Minute, func() (bool, string) {
		n := readyPods(ctx, ns, "web")
		return n == 3, fmt.Sprintf("%d Ready", n)
	})
	port := int(web.Spec.Ports[0].Port)
	readyWatch := watchReady(ctx, ns, "web", port, 2)
	// The same budget as ZooKeeper's clients see it: web's live members.
	conn, zkAddr := zookeeperAt(t)
	dir := "/discovery/web/dev"
	eventually(t, "web's 3 pods live in "+dir, 2*time.Minute, func() (bool, string) {
		n, err := liveMembers(ctx, conn, []string{zkAddr}, dir, ns, "web", port)
		if err != nil {
			return false, err.Error()
		}
		return n == 3, fmt.Sprintf("%d live", n)
	})
	zkWatch := watchLive(ctx, conn, []string{zkAddr}, dir, ns, "web", port, 2)
	// The emulator's own account of terminations, before the rollouts.
	aws := awsemu.NewClients(emulator, awsRegion(t, def))
	terminatedBefore := terminated(t, aws)
	// A batch task the drain must wait for, on the batch group.
	task := startHeldTask(t, ns)
	task.watch(ctx)

	runFlags := []string{"--kubeconfig", kubeconfig, "--lock-ttl", "20s", "--gate-timeout", "10m", "--drain-timeout", "5m"}
	kills, _ := strconv.Atoi(os.Getenv("E2E_AWS_KILLS"))
	if kills == 0 {
		kills = 1
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("emulator %s, %d kill(s), seed %d", emulator, kills, seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	// Rollouts onto new images until the kills have landed (a run may
	// finish before its kill): each one replaces every instance node once.
	var drained []string
	landed, ami := 0, ""
	for n := 0; n == 0 || landed < kills; n++ {
		if n > 0 {
			old = awaitInstanceNodes(t, awsNodes, ami)
		}
		ami = strings.TrimSpace(run(t, env, "local", "aws", "image", fmt.Sprintf("e2e-%d-%d", n, time.Now().Unix())))
		start := time.Now()
		got, resumed := rollWithKills(t, env, def, ami, runFlags, rng, kills-landed)
		landed += got
		t.Logf("rollout %d of %d nodes onto %s took %s with %d kill(s), %d taken over by ami resume; %d of %d kills landed",
			n, awsNodes, ami, time.Since(start).Round(time.Second), got, resumed, landed, kills)
		if n == 0 {
			task.check(t)
		}
		// The state store's account: every old instance replaced exactly once.
		st := amiStatus(t, env, def)
		replaced := replacedOf(st)
		slices.Sort(replaced)
		if st.Status != rollout.StatusDone || !slices.Equal(replaced, old) {
			t.Errorf("rollout %d %s: replaced %v, want each of %v once", n, st.Status, replaced, old)
		}
		// The emulator's account: exactly the old instances were
		// terminated in this rollout, no replacement among them.
		after := terminated(t, aws)
		var gone []string
		for id := range after {
			if !terminatedBefore[id] {
				gone = append(gone, id)
			}
		}
		slices.Sort(gone)
		if !slices.Equal(gone, old) {
			t.Errorf("rollout %d: the emulator terminated %v, want exactly the old instances %v", n, gone, old)
		}
		terminatedBefore = after
		// The cluster's account: only new-image instance nodes, all Ready.
		now := awaitInstanceNodes(t, awsNodes, ami)
		for _, id := range now {
			if slices.Contains(old, id) {
				t.Errorf("old instance %s is still a node", id)
			}
		}
		drained = append(drained, old...)
		if t.Failed() {
			break
		}
	}
	if landed < kills {
		t.Errorf("%d of the %d kills landed", landed, kills)
	}
	// Pause, status, abort and rollback across processes, on the nodes,
	// under the same watchers.
	drained = append(drained, nodeControls(t, env, def, ami, awsNodes, runFlags)...)
	readyWatch.stop()
	readyWatch.check(t)
	zkWatch.stop()
	zkWatch.check(t)
	checkShippedTicks(t, nodeLogs, drained, ns, "web", recorder.on(drained))
}

// rollWithKills runs `trellis ami rollout --yes` onto ami and SIGKILLs
// runs at seeded random moments (6 to 45 s into a run: after it took the
// lock), up to kills of them, each time checking that a new run is refused
// while the killed run's lock holds, and starting it again with `ami
// resume` once the lock expired, as a user would. It returns the kills that landed (a run may end
// before its kill) and the runs taken over by resume.
func rollWithKills(t *testing.T, env []string, def, ami string, runFlags []string, rng *rand.Rand, kills int) (landed, resumed int) {
	t.Helper()
	args := append([]string{"ami", "rollout", "-f", def, "--image", ami, "--yes"}, runFlags...)
	resume := append([]string{"ami", "resume", "-f", def}, runFlags...)
	for i := 0; ; i++ {
		cmd := command(env, args...)
		if i > 0 && amiStatus(t, env, def).Image == ami {
			cmd = command(env, resume...)
			resumed++
		}
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		var kill <-chan time.Time
		after := time.Duration(6000+rng.IntN(39000)) * time.Millisecond
		if landed < kills {
			kill = time.After(after)
		}
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("rollout run %d: %v\n%s", i, err, out.String())
			}
			return landed, resumed
		case <-kill:
			_ = cmd.Process.Signal(syscall.SIGKILL)
			if err := <-done; err == nil {
				t.Logf("run %d ended before its kill landed", i)
				return landed, resumed
			}
			landed++
			t.Logf("run %d killed after %s", i, after)
			// Its lock holds until it expires: a new run is refused.
			if b, err := command(env, args...).CombinedOutput(); err == nil || !strings.Contains(string(b), "another rollout holds the lock") {
				t.Errorf("a run right after a kill: %v, want refused by the lock\n%s", err, b)
			}
			time.Sleep(21 * time.Second)
		}
	}
}

// startLocalAWS runs `trellis local aws` for the test and returns the
// emulator's URL, the environment of commands against it and the host
// directory where each instance node's shipped logs stay after it is gone.
func startLocalAWS(t *testing.T, def string) (string, []string, string) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	nodeLogs := t.TempDir()
	log, err := os.Create(filepath.Join(t.TempDir(), "local-aws.log"))
	if err != nil {
		t.Fatal(err)
	}
	up := exec.Command(filepath.Join(root, "bin", "trellis"), "local", "aws", "-f", def, "--kubeconfig", kubeconfig,
		"--port", strconv.Itoa(port), "--env-file", filepath.Join(t.TempDir(), "env"), "--node-logs", nodeLogs)
	up.Dir, up.Stdout, up.Stderr = root, log, log
	if err := up.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = up.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { _ = up.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(3 * time.Minute):
			_ = up.Process.Kill()
		}
		if t.Failed() {
			b, _ := os.ReadFile(log.Name())
			t.Logf("trellis local aws:\n%s", b)
		}
	})
	url := fmt.Sprintf("http://127.0.0.1:%d", port)
	return url, []string{"TRELLIS_AWS_EMULATOR=" + url, "KOPS_STATE_STORE=" + awsState, "KUBECONFIG=" + kubeconfig}, nodeLogs
}

func command(env []string, args ...string) *exec.Cmd {
	cmd := exec.Command(filepath.Join(root, "bin", "trellis"), args...)
	cmd.Dir, cmd.Env = root, append(os.Environ(), env...)
	return cmd
}

func run(t *testing.T, env []string, args ...string) string {
	t.Helper()
	var out, errb bytes.Buffer
	cmd := command(env, args...)
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("trellis %v: %v\n%s", args, err, errb.String())
	}
	return out.String()
}

// awaitInstanceNodes waits until exactly n instance nodes exist, Ready,
// each running every trellis-system DaemonSet pod Ready (at least 4), on image (any if
// empty), and returns their instance ids, sorted.
func awaitInstanceNodes(t *testing.T, n int, image string) []string {
	t.Helper()
	ctx := context.Background()
	var ids []string
	eventually(t, fmt.Sprintf("%d instance nodes Ready with the runtime", n), 12*time.Minute, func() (bool, string) {
		nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: instanceLabel})
		if err != nil {
			return false, err.Error()
		}
		ids = nil
		for i := range nodes.Items {
			node := &nodes.Items[i]
			if image != "" && node.Labels[imageLabel] != image {
				return false, node.Name + " runs " + node.Labels[imageLabel]
			}
			if !nodeReady(node) {
				return false, node.Name + " not Ready"
			}
			pods, err := cs.CoreV1().Pods("trellis-system").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node.Name})
			if err != nil {
				return false, err.Error()
			}
			// The runtime daemons, not what else trellis-system runs there
			// (the hourly trellis-quota Job's finished pod, seen here).
			ready, daemons := 0, 0
			for j := range pods.Items {
				p := &pods.Items[j]
				if !ownedByDaemonSet(p) {
					continue
				}
				daemons++
				if podReady(p) {
					ready++
				}
			}
			if ready < 4 || ready < daemons { // netd, cert agent, registrar, log shipper
				return false, fmt.Sprintf("%s: %d of %d runtime pods Ready", node.Name, ready, daemons)
			}
			ids = append(ids, node.Name)
		}
		return len(ids) == n, fmt.Sprintf("%d of %d instance nodes", len(ids), n)
	})
	slices.Sort(ids)
	return ids
}

func ownedByDaemonSet(p *corev1.Pod) bool {
	for _, o := range p.OwnerReferences {
		if o.Kind == "DaemonSet" {
			return true
		}
	}
	return false
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue && p.DeletionTimestamp == nil
		}
	}
	return false
}

func readyPods(ctx context.Context, ns, svc string) int {
	pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: wellknown.LabelWorkload + "=" + svc})
	if err != nil {
		return -1
	}
	n := 0
	for i := range pods.Items {
		if podReady(&pods.Items[i]) {
			n++
		}
	}
	return n
}

// awsRegion is the region of the definition at def.
func awsRegion(t *testing.T, def string) string {
	t.Helper()
	d, err := bootdef.Load(def)
	if err != nil {
		t.Fatal(err)
	}
	return d.Region
}

// terminated is the instances the emulator holds as terminated (or on
// their way), from its own EC2 API rather than the rollout's state.
func terminated(t *testing.T, c *awsemu.Clients) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	p := ec2.NewDescribeInstancesPaginator(c.EC2, &ec2.DescribeInstancesInput{Filters: []ec2types.Filter{
		{Name: aws.String("instance-state-name"), Values: []string{"shutting-down", "terminated"}},
	}})
	for p.HasMorePages() {
		page, err := p.NextPage(context.Background())
		if err != nil {
			t.Fatalf("failed to list the emulator's terminated instances: %v", err)
		}
		for _, r := range page.Reservations {
			for _, i := range r.Instances {
				out[aws.ToString(i.InstanceId)] = true
			}
		}
	}
	return out
}
