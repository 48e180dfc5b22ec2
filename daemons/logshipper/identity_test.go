package logshipper

import (
	"encoding/json"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/trellis-dev/trellis/daemons/logshipper/sink"
)

// fakeMeta is a MetadataSource whose pods the test sets.
type fakeMeta struct {
	mu   sync.Mutex
	pods map[string]*PodInfo
}

func (m *fakeMeta) Lookup(uid string) (*PodInfo, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	p, ok := m.pods[uid]
	return p, ok
}

func (m *fakeMeta) set(uid string, p *PodInfo) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if p == nil {
		delete(m.pods, uid)
	} else {
		m.pods[uid] = p
	}
}

// TestIdentityFollowsThePod: a container's identity is rendered once per
// pod version, and rendered again when the informer has a new version or
// loses the pod; each record's JSON is what encoding/json makes of it.
func TestIdentityFollowsThePod(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	d := podDir(t, root, "shop", "web-1", "u1", "app")
	meta := &fakeMeta{pods: map[string]*PodInfo{"u1": {Service: "web", Env: "prod", Labels: map[string]string{"team": "a", "app": "web"},
		Workload: &sink.Workload{Kind: "Deployment", Name: "web"}}}}
	m := &memSink{}
	runShipper(t, Config{Root: root, Checkpoint: filepath.Join(t.TempDir(), "cp.json"), Sink: m, Meta: meta, Node: "n1",
		Poll: 20 * time.Millisecond, Linger: 20 * time.Millisecond})

	// Two reads of the same pod version.
	appendFile(t, filepath.Join(d, "0.log"), criLine("stdout", "F", "one"))
	waitLogs(t, m, 1)
	appendFile(t, filepath.Join(d, "0.log"), criLine("stdout", "F", "two"))
	waitLogs(t, m, 2)
	meta.set("u1", &PodInfo{Service: "web", Env: "prod", Labels: map[string]string{"team": "b"}, Workload: &sink.Workload{Kind: "StatefulSet", Name: "web"}})
	appendFile(t, filepath.Join(d, "0.log"), criLine("stdout", "F", "three"))
	waitLogs(t, m, 3)
	meta.set("u1", nil)
	appendFile(t, filepath.Join(d, "0.log"), criLine("stderr", "F", "four"))
	waitLogs(t, m, 4)

	m.mu.Lock()
	recs := append([]sink.Record(nil), m.recs...)
	m.mu.Unlock()
	// One identity per pod version, shared by its lines across reads.
	if len(recs) != 4 || recs[0].Identity != recs[1].Identity || recs[1].Identity == recs[2].Identity || recs[2].Identity == recs[3].Identity {
		t.Fatalf("want the identity shared by the first two records only, one per pod version; got %d records", len(recs))
	}
	wants := []struct{ team, kind string }{{"a", "Deployment"}, {"a", "Deployment"}, {"b", "StatefulSet"}, {"", ""}}
	for i, r := range recs {
		got := r.AppendJSON(nil) // the rendered identity
		want, err := json.Marshal(&r)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Errorf("record %d:\n got %s\nwant %s", i, got, want)
		}
		var back sink.Record
		if err := json.Unmarshal(got, &back); err != nil {
			t.Fatal(err)
		}
		kind := ""
		if back.Workload != nil {
			kind = back.Workload.Kind
		}
		if back.Labels["team"] != wants[i].team || kind != wants[i].kind || back.Node != "n1" || back.Pod != "web-1" {
			t.Errorf("record %d (%s): team %q, workload %q; want %q, %q", i, r.Log, back.Labels["team"], kind, wants[i].team, wants[i].kind)
		}
	}
}
