//go:build e2e

package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// shippedTicks is one pod's account in the log sink: the tick numbers
// shipped and whether its final line (written on SIGTERM) arrived.
type shippedTicks struct {
	pod   string
	node  string
	ticks []int
	final bool
}

// checkShippedTicks reads what the log shippers of the old instance nodes
// delivered to their file sink (kept on the host after the nodes went)
// and checks, for every pod of the service that ran there, that no line
// was lost: ticks 1..N each exactly once or more (the shipper is
// at-least-once), none missing, and the final line of its SIGTERM, since
// every one of them was drained off a node the rollout replaced.
func checkShippedTicks(t *testing.T, nodeLogs string, old []string, ns, service string) {
	t.Helper()
	pods := map[string]*shippedTicks{}
	for _, id := range old {
		path := filepath.Join(nodeLogs, id, "shipped.log")
		if err := readTicks(path, ns, service, pods); err != nil {
			t.Errorf("shipped logs of old instance %s: %v", id, err)
		}
	}
	if len(pods) == 0 {
		t.Errorf("no %s pod's lines in the old instances' shipped logs under %s: the check would prove nothing", service, nodeLogs)
		return
	}
	lines := 0
	for uid, p := range pods {
		slices.Sort(p.ticks)
		p.ticks = slices.Compact(p.ticks)
		lines += len(p.ticks)
		var missing []int
		for want, i := 1, 0; i < len(p.ticks); want++ {
			if p.ticks[i] == want {
				i++
				continue
			}
			missing = append(missing, want)
		}
		if len(missing) > 0 {
			t.Errorf("pod %s (%s) on %s: %d tick line(s) lost of %d, first %v", p.pod, uid, p.node, len(missing), len(p.ticks)+len(missing), missing[:min(len(missing), 5)])
		}
		if !p.final {
			t.Errorf("pod %s (%s) on %s: its final line (on SIGTERM) was not shipped after %d tick(s)", p.pod, uid, p.node, len(p.ticks))
		}
	}
	t.Logf("shipped logs: %d pod(s) of %s drained off old nodes, %d tick lines, none lost", len(pods), service, lines)
}

// readTicks adds the tick lines of ns's service pods in the sink file at
// path to pods, by pod UID.
func readTicks(path, ns, service string, pods map[string]*shippedTicks) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 1; sc.Scan(); n++ {
		var r struct {
			Log, Namespace, Pod, Container, UID, Node string
		}
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			return fmt.Errorf("%s:%d: %w", path, n, err)
		}
		if r.Namespace != ns || !strings.HasPrefix(r.Pod, service+"-") || r.Container != "hello" {
			continue
		}
		fields := strings.Fields(r.Log)
		if len(fields) < 2 || fields[0] != "tick" {
			continue
		}
		i, err := strconv.Atoi(fields[1])
		if err != nil {
			return fmt.Errorf("%s:%d: %q: %w", path, n, r.Log, err)
		}
		p := pods[r.UID]
		if p == nil {
			p = &shippedTicks{pod: r.Pod, node: r.Node}
			pods[r.UID] = p
		}
		if len(fields) == 3 && fields[2] == "final" {
			p.final = true
			continue
		}
		p.ticks = append(p.ticks, i)
	}
	return sc.Err()
}
