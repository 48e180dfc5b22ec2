// Package runcshim lets Docker run privileged containers on a host whose
// capability bounding set lacks CAP_SYS_RESOURCE (some VMs): runc refuses
// to give a container a capability the host does not have, so a privileged
// container (a kind node) cannot start. The shim is registered as dockerd's
// default runtime; it removes that capability from the OCI bundle's
// config.json on `create`/`run` and from the process file on `exec`, then
// executes the real runc with the same arguments.
package runcshim

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Dropped is the capability the shim removes.
const Dropped = "CAP_SYS_RESOURCE"

// capSysResource is its bit in /proc/*/status capability masks.
const capSysResource = 24

// Needed reports whether the host's capability bounding set (of this
// process, read from /proc/self/status) lacks CAP_SYS_RESOURCE, so
// privileged containers need the shim.
func Needed() (bool, error) {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return false, fmt.Errorf("read this process's capabilities: %w", err)
	}
	defer f.Close()
	return neededFrom(f)
}

func neededFrom(r interface{ Read([]byte) (int, error) }) (bool, error) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		v, ok := strings.CutPrefix(sc.Text(), "CapBnd:")
		if !ok {
			continue
		}
		mask, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
		if err != nil {
			return false, fmt.Errorf("parse CapBnd %q: %w", v, err)
		}
		return mask&(1<<capSysResource) == 0, nil
	}
	if err := sc.Err(); err != nil {
		return false, fmt.Errorf("read /proc/self/status: %w", err)
	}
	return false, fmt.Errorf("no CapBnd line in /proc/self/status")
}

// Rewrite edits, in place, the files a runc command line will read:
// the bundle's config.json for `create` and `run`, the --process file for
// `exec`. Other commands are left alone.
func Rewrite(args []string) error {
	cmd, rest := command(args)
	switch cmd {
	case "create", "run":
		bundle := flagValue(rest, "bundle", "b")
		if bundle == "" {
			bundle = "."
		}
		return editJSON(filepath.Join(bundle, "config.json"), func(doc map[string]any) {
			if p, ok := doc["process"].(map[string]any); ok {
				dropCaps(p)
			}
		})
	case "exec":
		if p := flagValue(rest, "process", "p"); p != "" {
			return editJSON(p, dropCaps)
		}
	}
	return nil
}

// runc's global flags that take a value.
var globalWithValue = map[string]bool{"--root": true, "--log": true, "--log-format": true, "--criu": true, "--rootless": true}

// command finds runc's subcommand after its global flags.
func command(args []string) (string, []string) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case globalWithValue[a]:
			i++
		case strings.HasPrefix(a, "-"):
		default:
			return a, args[i+1:]
		}
	}
	return "", nil
}

// flagValue finds --long VALUE, --long=VALUE, -short VALUE.
func flagValue(args []string, long, short string) string {
	for i, a := range args {
		for _, name := range []string{"--" + long, "-" + long, "-" + short} {
			if a == name && i+1 < len(args) {
				return args[i+1]
			}
			if v, ok := strings.CutPrefix(a, name+"="); ok {
				return v
			}
		}
	}
	return ""
}

// dropCaps removes Dropped from every capability list of an OCI process.
func dropCaps(process map[string]any) {
	caps, ok := process["capabilities"].(map[string]any)
	if !ok {
		return
	}
	for set, v := range caps {
		list, ok := v.([]any)
		if !ok {
			continue
		}
		kept := list[:0]
		for _, c := range list {
			if c != Dropped {
				kept = append(kept, c)
			}
		}
		caps[set] = kept
	}
}

// editJSON rewrites a JSON file through fn, keeping numbers exact and the
// file mode.
func editJSON(path string, fn func(map[string]any)) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("read the runc file to edit: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var doc map[string]any
	if err := dec.Decode(&doc); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	fn(doc)
	out, err := json.Marshal(doc)
	if err != nil {
		return fmt.Errorf("encode the edited %s: %w", path, err)
	}
	st, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("stat the runc file to edit: %w", err)
	}
	tmp := path + ".trellis-runc"
	if err := os.WriteFile(tmp, out, st.Mode().Perm()); err != nil {
		return fmt.Errorf("write the edited runc file: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("replace the runc file with its edit: %w", err)
	}
	return nil
}
