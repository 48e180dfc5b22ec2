// Package configinit is the config init container every workload gets: it
// renders the workload's inline config (mounted from its ConfigMap) into the
// shared in-memory config volume before the app starts, expanding
// ${TRELLIS_*} and ${POD_*} references from the pod's identity environment,
// and writes that identity as identity.env beside it.
package configinit

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/trellis-dev/trellis/api/wellknown"
	"github.com/trellis-dev/trellis/internal/fsync"
)

// Expanded reports whether a variable name is expanded from the
// environment: the identity variables the controller injects.
func Expanded(name string) bool {
	return strings.HasPrefix(name, wellknown.EnvPrefix) || strings.HasPrefix(name, "POD_")
}

// ref is a ${NAME} reference; nothing else ($NAME, $$) is touched.
var ref = regexp.MustCompile(`\$\{[A-Za-z_][A-Za-z0-9_]*\}`)

// Render writes every file of src (a ConfigMap volume: its ..data links are
// followed, its hidden entries skipped) into dst with identity references
// expanded, plus dst/identity.env. Other ${...} text is left as it is. A
// missing src is an empty config.
func Render(src, dst string, getenv func(string) string, environ []string) ([]string, error) {
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return nil, fmt.Errorf("make the config directory: %w", err)
	}
	var written []string
	entries, err := os.ReadDir(src)
	if err != nil && !os.IsNotExist(err) {
		return nil, fmt.Errorf("read config source %s: %w", src, err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			continue
		}
		p := filepath.Join(src, e.Name())
		st, err := os.Stat(p) // follows the ConfigMap's symlinks
		if err != nil {
			return nil, fmt.Errorf("read config source: %w", err)
		}
		if !st.Mode().IsRegular() {
			continue
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("read config source: %w", err)
		}
		out := ref.ReplaceAllStringFunc(string(data), func(m string) string {
			if name := m[2 : len(m)-1]; Expanded(name) {
				return getenv(name)
			}
			return m
		})
		if err := fsync.Replace(filepath.Join(dst, e.Name()), []byte(out), 0o644); err != nil {
			return nil, err
		}
		written = append(written, e.Name())
	}
	var ident []string
	for _, kv := range environ {
		if name, _, ok := strings.Cut(kv, "="); ok && Expanded(name) {
			ident = append(ident, kv)
		}
	}
	slices.Sort(ident)
	if err := fsync.Replace(filepath.Join(dst, "identity.env"), []byte(strings.Join(ident, "\n")+"\n"), 0o644); err != nil {
		return nil, err
	}
	return append(written, "identity.env"), nil
}
