package wellknown

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Port is one entry of a ports list: a named port of a pod.
type Port struct {
	Name string
	Port int
}

// ErrNoPorts is returned by ParsePorts for an empty list.
var ErrNoPorts = errors.New("no ports")

// ParsePorts parses a ports list, the value of AnnotationDiscoveryPorts and
// of the traffic sidecar's --ports flag: name:port entries separated by
// commas, in declaration order, the first being the service endpoint. A name
// must be non-empty and unique, a port a number from 1 to 65535. An invalid
// list yields no ports and an error naming every bad entry, so a pod is never
// registered under some of its ports, or with the wrong service endpoint.
func ParsePorts(s string) ([]Port, error) {
	if strings.TrimSpace(s) == "" {
		return nil, ErrNoPorts
	}
	var (
		ports []Port
		bad   []string
		seen  = map[string]bool{}
	)
	for i, entry := range strings.Split(s, ",") {
		name, port, ok := strings.Cut(entry, ":")
		name, port = strings.TrimSpace(name), strings.TrimSpace(port)
		n, err := strconv.Atoi(port)
		switch {
		case !ok:
			bad = append(bad, fmt.Sprintf("entry %d %q: want name:port", i, entry))
		case name == "":
			bad = append(bad, fmt.Sprintf("entry %d %q: empty name", i, entry))
		case err != nil || n < 1 || n > 65535:
			bad = append(bad, fmt.Sprintf("entry %d %q: port must be a number from 1 to 65535", i, entry))
		case seen[name]:
			bad = append(bad, fmt.Sprintf("entry %d %q: duplicate name %q", i, entry, name))
		default:
			seen[name] = true
			ports = append(ports, Port{Name: name, Port: n})
		}
	}
	if len(bad) > 0 {
		return nil, fmt.Errorf("invalid ports list %q: %s", s, strings.Join(bad, "; "))
	}
	return ports, nil
}
