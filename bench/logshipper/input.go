package main

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// podLog is one container's log file, named the way kubelet names it:
// <root>/<namespace>_<pod>_<uid>/<container>/0.log (discover.go splits
// the pod dir on '_' into those three).
type podLog struct {
	ns, pod, uid, container string
}

func (p podLog) dir(root string) string {
	return filepath.Join(root, p.ns+"_"+p.pod+"_"+p.uid, p.container)
}

// key names the file in the consumer's check: what a record carries.
func (p podLog) key() string { return p.uid + "/" + p.container }

// input is what was written: every file has perFile lines, the line
// numbered j (0-based) saying "items/<j>", so a consumer can check each
// file's lines arrived once each, in order.
type input struct {
	logs    []podLog
	perFile int
	bytes   int64
}

func (in input) lines() int { return in.perFile * len(in.logs) }

// writeLogs writes perFile CRI lines to each log under root.
func writeLogs(root string, logs []podLog, perFile int) (input, error) {
	in := input{logs: logs, perFile: perFile}
	rng := rand.New(rand.NewPCG(1, 2))
	ts := time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)
	var b bytes.Buffer
	for _, l := range logs {
		d := l.dir(root)
		if err := os.MkdirAll(d, 0o755); err != nil {
			return in, fmt.Errorf("create the log dir of %s/%s: %w", l.ns, l.pod, err)
		}
		b.Reset()
		for j := range perFile {
			ts = ts.Add(time.Microsecond)
			fmt.Fprintf(&b, "%s stdout F GET /api/v1/items/%d 200 %dms user=%d %s\n", ts.Format(time.RFC3339Nano), j, rng.IntN(500), rng.IntN(1e6), strings.Repeat("x", rng.IntN(120)))
		}
		in.bytes += int64(b.Len())
		if err := os.WriteFile(filepath.Join(d, "0.log"), b.Bytes(), 0o644); err != nil {
			return in, fmt.Errorf("write the log of %s/%s: %w", l.ns, l.pod, err)
		}
	}
	return in, nil
}

// pathOnlyLogs are logs of pods no apiserver knows (the path-only mode):
// the same shape as the informer mode's, with made-up UIDs.
func pathOnlyLogs(nPods, perService int) []podLog {
	logs := make([]podLog, nPods)
	for i := range logs {
		logs[i] = podLog{ns: benchNamespace, pod: fmt.Sprintf("%s-%05d", serviceName(i/perService), i), uid: fmt.Sprintf("%08d-0000-4000-8000-000000000000", i), container: "app"}
	}
	return logs
}
