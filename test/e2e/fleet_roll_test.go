//go:build e2e

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/trellis-dev/trellis/addons"
	karmadaaddon "github.com/trellis-dev/trellis/fleet/karmada/addon"
	"github.com/trellis-dev/trellis/internal/pki"
)

// rollWithMemberDown changes the fleet API's pod template (as the restart
// after a certificate renewal changes it) while member 0's etcd is stopped
// (SIGSTOP: its pod stays, not ready), and applies: the applier replaces
// member 0 first, then 2 and 1, one at a time, each once the one before is
// back. A client inside the cluster writes through the Service the whole
// time; every write it was told succeeded must be there after.
func rollWithMemberDown(t *testing.T, a *addons.Applier, rendered []addons.Rendered, secret *corev1.Secret, member func(int) kubernetes.Interface) {
	ctx := context.Background()
	name := func(i int) string { return fmt.Sprintf("%s-%d", karmadaaddon.KarmadaService, i) }
	pid := etcdPID(t, name(0))
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	// The pod's deletion ends the stopped process (SIGKILL after its grace
	// period); should the test fail first, so does removing the fleet.
	stopped := time.Now()
	eventually(t, "member 0 not ready with its etcd stopped", 2*time.Minute, func() (bool, string) {
		p, err := cs.CoreV1().Pods(addons.Namespace).Get(ctx, name(0), metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return !podReady(p), "still ready"
	})
	t.Logf("member 0 not ready %s after its etcd was stopped", time.Since(stopped).Round(time.Second))

	w := startServiceWriter(t, secret)
	patch := fmt.Sprintf(`{"spec":{"template":{"metadata":{"annotations":{"e2e.trellis.dev/roll":%q}}}}}`, time.Now().UTC().Format(time.RFC3339))
	if _, err := cs.AppsV1().StatefulSets(addons.Namespace).Patch(ctx, karmadaaddon.KarmadaService, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{FieldManager: "e2e"}); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	a.Out = &out
	terminations := watchTerminations()
	start := time.Now()
	res, err := a.Apply(ctx, rendered)
	a.Out = os.Stdout
	took := time.Since(start)
	// A ready member's old pod ends on its own, well inside its 30 s
	// grace (its kube-apiserver's shutdown flags bound it, whatever it
	// proxies); the stopped one is killed at the end of the grace.
	ended := terminations()
	t.Logf("old pods' termination (deletion seen -> gone): %v", ended)
	for _, i := range []int{1, 2} {
		if d, ok := ended[name(i)]; !ok || d > 20*time.Second {
			t.Errorf("%s's old pod took %s (seen %v) to end, want under 20s: killed at the grace's end?", name(i), d, ok)
		}
	}
	t.Logf("apply:\n%s", out.String())
	if err != nil {
		t.Fatalf("roll with member 0 down: %v", err)
	}
	time.Sleep(5 * time.Second) // writes after the last replacement
	writes := w.stop(t)

	var rolled []string
	for _, l := range strings.Split(out.String(), "\n") {
		if f := strings.Fields(l); len(f) > 4 && strings.HasPrefix(l, "replaced fleet API member ") {
			rolled = append(rolled, f[4])
		}
	}
	if want := []string{name(0), name(2), name(1)}; fmt.Sprint(rolled) != fmt.Sprint(want) {
		t.Fatalf("replaced %v, want %v (the down member first, then from the highest)", rolled, want)
	}
	if n := replacedCount(res); n != 3 {
		t.Errorf("apply results say %d members replaced, want 3", n)
	}
	s, err := cs.AppsV1().StatefulSets(addons.Namespace).Get(ctx, karmadaaddon.KarmadaService, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		p, err := cs.CoreV1().Pods(addons.Namespace).Get(ctx, name(i), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if p.Labels[appsv1.StatefulSetRevisionLabel] != s.Status.UpdateRevision || !podReady(p) {
			t.Errorf("%s on revision %s, ready %v: want %s, ready", p.Name, p.Labels[appsv1.StatefulSetRevisionLabel], podReady(p), s.Status.UpdateRevision)
		}
	}

	// Every write acknowledged is there (read through a member's own
	// apiserver); how long writes failed.
	fleet := member(1)
	var ok, failed int
	var outage, longest time.Duration
	var lastOK time.Time
	for _, wr := range writes {
		if wr.code == "201" {
			ok++
			if !lastOK.IsZero() {
				outage = wr.at.Sub(lastOK)
				longest = max(longest, outage)
			}
			lastOK = wr.at
			if _, err := fleet.CoreV1().ConfigMaps("default").Get(ctx, wr.name, metav1.GetOptions{}); err != nil {
				t.Errorf("write %s acknowledged during the roll, then: %v", wr.name, err)
			}
			continue
		}
		failed++
	}
	t.Logf("roll of 3 members with member 0 down: %s; %d writes through the Service acknowledged, %d failed, longest time between two acknowledged writes %s", took.Round(time.Second), ok, failed, longest.Round(100*time.Millisecond))
	last := writes[len(writes)-1]
	if ok == 0 || last.code != "201" {
		t.Fatalf("writes through the Service after the roll: last %+v", last)
	}

	// Each member is a new pod at a new address on its volume: member 2's
	// own copy (a serializable read of its etcd, through a port-forward
	// to the pod's loopback) has what was written before the roll and
	// during it.
	ec := memberEtcd(t, 2)
	eventually(t, "member 2's own copy after the roll", time.Minute, func() (bool, string) {
		c, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		var missing []string
		for _, k := range []string{"written-at-0", "while-1-down-9", last.name} {
			resp, err := ec.Get(c, "/registry/configmaps/default/"+k, clientv3.WithCountOnly(), clientv3.WithSerializable())
			if err != nil {
				return false, err.Error()
			}
			if resp.Count != 1 {
				missing = append(missing, k)
			}
		}
		return len(missing) == 0, fmt.Sprintf("missing %v", missing)
	})
}

// watchTerminations polls the fleet API's pods every 200 ms from now on
// and returns a stop that says how long each pod name's first deleted
// pod took, from the poll that saw its deletion to the one that saw it
// gone (or replaced by a pod of another UID).
func watchTerminations() func() map[string]time.Duration {
	ctx, cancel := context.WithCancel(context.Background())
	seen := map[types.UID]time.Time{}
	names := map[types.UID]string{}
	out := map[string]time.Duration{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			pods, err := cs.CoreV1().Pods(addons.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=" + karmadaaddon.KarmadaService})
			if err == nil {
				now := time.Now()
				live := map[types.UID]bool{}
				for _, p := range pods.Items {
					live[p.UID] = true
					if _, ok := seen[p.UID]; !ok && p.DeletionTimestamp != nil {
						seen[p.UID], names[p.UID] = now, p.Name
					}
				}
				for uid, at := range seen {
					if _, ended := out[names[uid]]; !live[uid] && !ended {
						out[names[uid]] = now.Sub(at).Round(100 * time.Millisecond)
					}
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()
	// out is read only once the poller has ended.
	return func() map[string]time.Duration {
		cancel()
		<-done
		return out
	}
}

func replacedCount(res []addons.Result) int {
	for _, r := range res {
		if r.Addon == karmadaaddon.KarmadaAPIServerAddon && r.Action == "members replaced" {
			return r.Objects
		}
	}
	return 0
}

// serviceWriter creates ConfigMaps through the fleet API's Service from
// inside the cluster (curl on the untainted node, which reaches the
// Service's address as any pod would), one every 200 ms.
type serviceWriter struct {
	cmd          *exec.Cmd
	out          *bytes.Buffer
	node, remote string
	done         chan error
	once         sync.Once
	err          error
}

type write struct {
	at   time.Time
	name string
	code string
}

func startServiceWriter(t *testing.T, secret *corev1.Secret) *serviceWriter {
	t.Helper()
	ctx := context.Background()
	node := untaintedNode(t)
	dir := t.TempDir()
	for k, f := range map[string]string{pki.CACert: "ca.crt", pki.AdminCert: "admin.crt", pki.AdminKey: "admin.key"} {
		if err := os.WriteFile(filepath.Join(dir, f), secret.Data[k], 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// Not under /tmp: a kind node's /tmp is a tmpfs, which docker cp
	// does not write into.
	const remote = "/var/lib/trellis-e2e-writer"
	if out, err := exec.Command("docker", "exec", node, "rm", "-rf", remote).CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if out, err := exec.Command("docker", "cp", dir, node+":"+remote).CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	svc, err := cs.CoreV1().Services(addons.Namespace).Get(ctx, karmadaaddon.KarmadaService, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	host := strings.TrimSuffix(strings.TrimPrefix(karmadaaddon.KarmadaServer(), "https://"), ":"+strconv.Itoa(karmadaaddon.KarmadaPort))
	script := fmt.Sprintf(`[ -r %[1]s/admin.key ] || { echo "no client certificate in %[1]s" >&2; exit 1; }
i=0; while [ ! -e %[1]s/stop ]; do
  i=$((i+1)); t=$(date +%%s.%%N)
  c=$(curl -s -o /dev/null -w '%%{http_code}' --max-time 5 --cacert %[1]s/ca.crt --cert %[1]s/admin.crt --key %[1]s/admin.key \
    --resolve %[2]s:%[3]d:%[4]s -H 'Content-Type: application/json' \
    -d "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"roll-$i\"}}" \
    https://%[2]s:%[3]d/api/v1/namespaces/default/configmaps)
  echo "$t roll-$i $c"; sleep 0.2
done`, remote, host, karmadaaddon.KarmadaPort, svc.Spec.ClusterIP)
	w := &serviceWriter{cmd: exec.Command("docker", "exec", node, "sh", "-c", script), out: &bytes.Buffer{}, node: node, remote: remote, done: make(chan error, 1)}
	w.cmd.Stdout, w.cmd.Stderr = w.out, os.Stderr
	if err := w.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { w.done <- w.cmd.Wait() }()
	t.Cleanup(func() { _ = w.end() })
	return w
}

// end asks the writer's loop to stop, and kills it (in the node too: the
// docker client's end does not end it there) if it has not within 10 s.
func (w *serviceWriter) end() error {
	w.once.Do(func() {
		_ = exec.Command("docker", "exec", w.node, "touch", w.remote+"/stop").Run()
		select {
		case w.err = <-w.done:
		case <-time.After(10 * time.Second):
			_ = exec.Command("docker", "exec", w.node, "pkill", "-f", w.remote).Run()
			_ = w.cmd.Process.Kill()
			w.err = fmt.Errorf("the writer did not stop: killed (%v)", <-w.done)
		}
	})
	return w.err
}

// stop ends the writer and returns its writes.
func (w *serviceWriter) stop(t *testing.T) []write {
	t.Helper()
	if err := w.end(); err != nil {
		t.Fatalf("the writer: %v", err)
	}
	var out []write
	sc := bufio.NewScanner(w.out)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 3 {
			continue
		}
		sec, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			continue
		}
		out = append(out, write{at: time.Unix(0, int64(sec*1e9)), name: f[1], code: f[2]})
	}
	if len(out) == 0 {
		t.Fatal("the writer wrote nothing")
	}
	return out
}
