package liveset

import (
	"errors"
	"fmt"
	"net"
	"path"
	"strconv"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/trellis-dev/trellis/internal/serverset"
)

// Znode is one child of a serverset directory as read from ZooKeeper.
type Znode struct {
	Name string
	Data []byte
	// Owner is the ephemeral owner session (0: a persistent znode).
	Owner int64
}

// Reader is the part of *zk.Conn a count needs.
type Reader interface {
	Children(path string) ([]string, *zk.Stat, error)
	Get(path string) ([]byte, *zk.Stat, error)
}

var _ Reader = (*zk.Conn)(nil)

// Read returns the children of dir with their data and owners. A child
// deleted between the listing and its read is skipped (it is gone).
func Read(r Reader, dir string) ([]Znode, error) {
	names, _, err := r.Children(dir)
	if err != nil {
		return nil, fmt.Errorf("failed to list %s: %w", dir, err)
	}
	out := make([]Znode, 0, len(names))
	for _, n := range names {
		data, stat, err := r.Get(path.Join(dir, n))
		if errors.Is(err, zk.ErrNoNode) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("failed to read %s/%s: %w", dir, n, err)
		}
		out = append(out, Znode{Name: n, Data: data, Owner: stat.EphemeralOwner})
	}
	return out, nil
}

// Sessions returns the sessions connected to any of the servers now, from
// the `cons` four-letter command (it must be whitelisted).
func Sessions(servers []string, timeout time.Duration) (map[int64]bool, error) {
	all, ok := zk.FLWCons(servers, timeout)
	if !ok {
		return nil, fmt.Errorf("four-letter command cons failed on %v (is it whitelisted?)", servers)
	}
	out := map[int64]bool{}
	for _, s := range all {
		if s.Error != nil {
			return nil, fmt.Errorf("cons: %w", s.Error)
		}
		for _, c := range s.Clients {
			out[c.SessionID] = true
		}
	}
	return out, nil
}

// Count is the number of live members among nodes: ephemeral, owned by a
// session in sessions (nil: trust that ZooKeeper keeps only unexpired
// sessions' ephemerals), parseable, and whose service endpoint host:port is
// in ready. Why each other znode was left out is in skipped.
func Count(nodes []Znode, sessions map[int64]bool, ready map[string]bool) (live int, skipped []string) {
	seen := map[string]bool{}
	for _, n := range nodes {
		m, err := serverset.ParseMember(n.Data)
		switch {
		case n.Owner == 0:
			skipped = append(skipped, n.Name+": not ephemeral")
		case sessions != nil && !sessions[n.Owner]:
			skipped = append(skipped, fmt.Sprintf("%s: session 0x%x is not connected", n.Name, n.Owner))
		case err != nil:
			skipped = append(skipped, fmt.Sprintf("%s: %v", n.Name, err))
		default:
			addr := net.JoinHostPort(m.ServiceEndpoint.Host, strconv.Itoa(m.ServiceEndpoint.Port))
			switch {
			case !ready[addr]:
				skipped = append(skipped, n.Name+": "+addr+" is not a Ready pod's address")
			case seen[addr]:
				skipped = append(skipped, n.Name+": "+addr+" counted already")
			default:
				seen[addr] = true
				live++
			}
		}
	}
	return live, skipped
}
