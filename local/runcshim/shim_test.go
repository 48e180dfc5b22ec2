package runcshim

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const process = `{"terminal":false,"user":{"uid":0,"gid":0},"args":["/sbin/init"],"oomScoreAdj":-999,
"capabilities":{"bounding":["CAP_CHOWN","CAP_SYS_RESOURCE","CAP_SYS_ADMIN"],"effective":["CAP_SYS_RESOURCE","CAP_CHOWN"],
"permitted":["CAP_SYS_RESOURCE"],"inheritable":[]}}`

func TestNeededFrom(t *testing.T) {
	for _, tc := range []struct {
		status string
		want   bool
	}{
		{"Name:\tx\nCapBnd:\t000001fffeffffff\n", true},  // this VM: bit 24 clear
		{"Name:\tx\nCapBnd:\t000001ffffffffff\n", false}, // a full bounding set
	} {
		got, err := neededFrom(strings.NewReader(tc.status))
		if err != nil || got != tc.want {
			t.Errorf("neededFrom(%q) = %v, %v; want %v", tc.status, got, err, tc.want)
		}
	}
	if _, err := neededFrom(strings.NewReader("Name:\tx\n")); err == nil {
		t.Error("no CapBnd line: want an error")
	}
}

func caps(t *testing.T, path string, inProcess bool) map[string][]string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Process struct {
			Capabilities map[string][]string `json:"capabilities"`
			OOMScoreAdj  json.Number         `json:"oomScoreAdj"`
		} `json:"process"`
		Capabilities map[string][]string `json:"capabilities"`
		OOMScoreAdj  json.Number         `json:"oomScoreAdj"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	if inProcess {
		if doc.Process.OOMScoreAdj != "-999" {
			t.Errorf("other fields must survive: oomScoreAdj = %q", doc.Process.OOMScoreAdj)
		}
		return doc.Process.Capabilities
	}
	return doc.Capabilities
}

func checkDropped(t *testing.T, c map[string][]string) {
	t.Helper()
	if len(c) != 4 {
		t.Fatalf("capability sets = %v, want 4", c)
	}
	for set, list := range c {
		if slices.Contains(list, Dropped) {
			t.Errorf("%s still has %s: %v", set, Dropped, list)
		}
	}
	if !slices.Contains(c["bounding"], "CAP_SYS_ADMIN") || !slices.Contains(c["effective"], "CAP_CHOWN") {
		t.Errorf("other capabilities must stay: %v", c)
	}
}

func TestRewriteCreate(t *testing.T) {
	for _, args := range [][]string{
		// What dockerd (containerd-shim) runs.
		{"--root", "/var/run/docker/runtime-runc/moby", "--log", "/run/x/log.json", "--log-format", "json", "create", "--bundle", "BUNDLE", "--pid-file", "/run/x/init.pid", "abc"},
		{"--systemd-cgroup", "run", "--bundle=BUNDLE", "abc"},
		{"create", "-b", "BUNDLE", "abc"},
	} {
		dir := t.TempDir()
		cfg := filepath.Join(dir, "config.json")
		if err := os.WriteFile(cfg, []byte(`{"ociVersion":"1.2.0","process":`+process+`}`), 0o600); err != nil {
			t.Fatal(err)
		}
		for i := range args {
			args[i] = strings.ReplaceAll(args[i], "BUNDLE", dir)
		}
		if err := Rewrite(args); err != nil {
			t.Fatalf("Rewrite(%v): %v", args, err)
		}
		checkDropped(t, caps(t, cfg, true))
		st, _ := os.Stat(cfg)
		if st.Mode().Perm() != 0o600 {
			t.Errorf("mode = %v, want 0600", st.Mode())
		}
	}
}

func TestRewriteExec(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "process.json")
	if err := os.WriteFile(p, []byte(process), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := Rewrite([]string{"--root", "/r", "exec", "--process", p, "--detach", "--pid-file", "/x", "abc"}); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(p)
	var c struct {
		Capabilities map[string][]string `json:"capabilities"`
	}
	if err := json.Unmarshal(data, &c); err != nil {
		t.Fatal(err)
	}
	checkDropped(t, c.Capabilities)
}

func TestRewriteLeavesOtherCommands(t *testing.T) {
	for _, args := range [][]string{{"--root", "/r", "start", "abc"}, {"delete", "--force", "abc"}, {"state", "abc"}, {"--version"}} {
		if err := Rewrite(args); err != nil {
			t.Errorf("Rewrite(%v): %v", args, err)
		}
	}
	if err := Rewrite([]string{"create", "--bundle", "/nonexistent", "x"}); err == nil {
		t.Error("a missing bundle must be an error, not a silent pass")
	}
}
