package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/trellis-dev/trellis/internal/fsync"
)

// rotator plays a container runtime writing one container's log and the
// rotation of it: by rename (the kubelet's way, to 0.log.<timestamp>) or
// by copytruncate (logrotate's way: 0.log.1 is the newest copy, older
// copies shift to .2, .3, ..., so names do not sort by age).
type rotator struct {
	t        *testing.T
	dir      string
	name     string // the container, also the lines' prefix
	copy     bool   // copytruncate, else rename
	seq      int
	rotation int
	want     []string
}

func (r *rotator) write(n int) {
	r.t.Helper()
	f, err := os.OpenFile(filepath.Join(r.dir, "0.log"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		r.t.Fatal(err)
	}
	defer f.Close()
	for range n {
		msg := fmt.Sprintf("%s seq %d", r.name, r.seq)
		r.seq++
		r.want = append(r.want, msg)
		if _, err := fmt.Fprintf(f, "%s stdout F %s\n", time.Now().UTC().Format(time.RFC3339Nano), msg); err != nil {
			r.t.Fatal(err)
		}
	}
}

func (r *rotator) rotate() {
	r.t.Helper()
	r.rotation++
	live := filepath.Join(r.dir, "0.log")
	if !r.copy {
		ts := time.Date(2026, 11, 28, 1, 0, r.rotation, 0, time.UTC).Format("20060102-150405")
		if err := os.Rename(live, live+"."+ts); err != nil {
			r.t.Fatal(err)
		}
		return
	}
	for i := r.rotation - 1; i >= 1; i-- {
		if err := os.Rename(fmt.Sprintf("%s.%d", live, i), fmt.Sprintf("%s.%d", live, i+1)); err != nil {
			r.t.Fatal(err)
		}
	}
	b, err := os.ReadFile(live)
	if err != nil {
		r.t.Fatal(err)
	}
	if err := os.WriteFile(live+".1", b, 0o644); err != nil {
		r.t.Fatal(err)
	}
	if err := os.Truncate(live, 0); err != nil {
		r.t.Fatal(err)
	}
}

// shipped reads the file sink's output: each container's messages in the
// order they were shipped.
func shipped(t *testing.T, path string) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return out
	}
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var rec struct{ Log, Container string }
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			continue // a line cut by SIGKILL mid-write
		}
		out[rec.Container] = append(out[rec.Container], rec.Log)
	}
	return out
}

// checkpointCovers reports whether the checkpoint says every byte of each
// container's live 0.log was shipped.
func checkpointCovers(t *testing.T, path string, dirs ...string) bool {
	t.Helper()
	b, _, err := fsync.ReadRecord(path)
	if err != nil {
		return false
	}
	var cp struct {
		Positions []struct {
			Dir, Path string
			Offset    int64
		}
	}
	if err := json.Unmarshal(b, &cp); err != nil {
		return false
	}
	for _, d := range dirs {
		fi, err := os.Stat(filepath.Join(d, "0.log"))
		if err != nil {
			return false
		}
		ok := false
		for _, p := range cp.Positions {
			ok = ok || (p.Dir == d && p.Path == "0.log" && p.Offset == fi.Size())
		}
		if !ok {
			return false
		}
	}
	return true
}

// TestIntegrationStoppedAcrossRotations holds the real shipper with
// SIGSTOP while each container's log rotates several times (by rename and
// by copytruncate), with lines in every generation, then kills it with
// SIGKILL and starts it again: every line of every generation must be
// shipped once, in the order it was written.
func TestIntegrationStoppedAcrossRotations(t *testing.T) {
	for _, rotations := range []int{2, 5} {
		t.Run(fmt.Sprintf("%d rotations", rotations), func(t *testing.T) {
			root, state := t.TempDir(), t.TempDir()
			var rs []*rotator
			for _, c := range []struct {
				pod, name string
				copy      bool
			}{{"shop_web-1_u1", "rename", false}, {"shop_web-2_u2", "copytruncate", true}} {
				d := filepath.Join(root, c.pod, c.name)
				if err := os.MkdirAll(d, 0o755); err != nil {
					t.Fatal(err)
				}
				rs = append(rs, &rotator{t: t, dir: d, name: c.name, copy: c.copy})
			}
			out, checkpoint := filepath.Join(state, "out.jsonl"), filepath.Join(state, "checkpoint.json")
			p := newShipperProc(t, fmt.Sprintf("--root=%s --checkpoint=%s --sink=file --file=%s --kubeconfig=none --listen=127.0.0.1:0 --poll=20ms --node-name=node-a",
				root, checkpoint, out))
			for _, r := range rs {
				r.write(10)
			}
			cmd := p.start()
			t.Cleanup(func() { kill(cmd) })
			ctx := context.Background()
			if err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
				return checkpointCovers(t, checkpoint, rs[0].dir, rs[1].dir), nil
			}); err != nil {
				t.Fatal("the first lines were never shipped and checkpointed")
			}
			// Held: the shipper sees none of what follows until it is
			// killed and started again.
			stop(t, cmd)
			for range rotations {
				for _, r := range rs {
					r.write(5) // the generation's last lines, never read
					r.rotate()
					r.write(10) // the next generation's first lines
				}
			}
			kill(cmd)
			cmd = p.start()
			err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 20*time.Second, true, func(context.Context) (bool, error) {
				got := shipped(t, out)
				return len(got["rename"]) >= len(rs[0].want) && len(got["copytruncate"]) >= len(rs[1].want), nil
			})
			got := shipped(t, out)
			for _, r := range rs {
				if g, w := strings.Join(got[r.name], "\n"), strings.Join(r.want, "\n"); g != w {
					t.Errorf("%s: shipped %d lines, want %d in order, once:\n%s", r.name, len(got[r.name]), len(r.want), diffLines(got[r.name], r.want))
				}
			}
			if err != nil {
				t.Errorf("not everything was shipped within 20 s of the restart")
			}
		})
	}
}

// diffLines says which wanted lines are missing, which came twice and
// where the order breaks.
func diffLines(got, want []string) string {
	count := map[string]int{}
	for _, g := range got {
		count[g]++
	}
	var missing, twice []string
	for _, w := range want {
		switch count[w] {
		case 0:
			missing = append(missing, w)
		case 1:
		default:
			twice = append(twice, w)
		}
	}
	pos := map[string]int{}
	for i, w := range want {
		pos[w] = i
	}
	var order []string
	for i := 1; i < len(got); i++ {
		if pos[got[i]] < pos[got[i-1]] {
			order = append(order, fmt.Sprintf("%q after %q", got[i], got[i-1]))
		}
	}
	return fmt.Sprintf("  missing %d: %v\n  twice %d: %v\n  out of order %d: %v", len(missing), missing, len(twice), twice, len(order), order)
}
