package liveset

import (
	"errors"
	"fmt"
	"io"
	"net"
	"path"
	"regexp"
	"strconv"
	"strings"
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
// the `cons` four-letter command (it must be whitelisted). go-zookeeper's
// FLWCons does not parse ZooKeeper 3.8's answer (its latencies are
// decimals): only the session ids are read here.
func Sessions(servers []string, timeout time.Duration) (map[int64]bool, error) {
	out := map[int64]bool{}
	for _, s := range servers {
		answer, err := fourLetter(s, "cons", timeout)
		if err != nil {
			return nil, err
		}
		if err := parseCons(answer, out); err != nil {
			return nil, fmt.Errorf("cons on %s: %w", s, err)
		}
	}
	return out, nil
}

var sidRE = regexp.MustCompile(`sid=0x([0-9a-fA-F]+)`)

// parseCons adds the session ids of a cons answer to out. An answer with
// no connection at all (not even the asker's) is refused: cons is then
// not whitelisted.
func parseCons(answer string, out map[int64]bool) error {
	if strings.Contains(answer, "is not executed because it is not in the whitelist") {
		return errors.New(strings.TrimSpace(answer))
	}
	lines := 0
	for _, line := range strings.Split(answer, "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		lines++
		if m := sidRE.FindStringSubmatch(line); m != nil {
			id, err := strconv.ParseUint(m[1], 16, 64)
			if err != nil {
				return fmt.Errorf("%q: %w", line, err)
			}
			out[int64(id)] = true
		}
	}
	if lines == 0 {
		return errors.New("empty answer")
	}
	return nil
}

func fourLetter(server, cmd string, timeout time.Duration) (string, error) {
	conn, err := net.DialTimeout("tcp", server, timeout)
	if err != nil {
		return "", fmt.Errorf("four-letter command %s on %s: %w", cmd, server, err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(timeout))
	if _, err := conn.Write([]byte(cmd)); err != nil {
		return "", fmt.Errorf("four-letter command %s on %s: %w", cmd, server, err)
	}
	b, err := io.ReadAll(conn)
	if err != nil {
		return "", fmt.Errorf("four-letter command %s on %s: %w", cmd, server, err)
	}
	return string(b), nil
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
