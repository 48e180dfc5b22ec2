// Package etcdanalyze reads an etcd snapshot (a bbolt file, as `etcdctl
// snapshot save` writes it) and says where the bytes are: size and count
// per key space (/registry/<resource>[/<namespace>]), live and in old
// revisions not yet compacted. It writes a table, folded stacks and an SVG
// flame graph of the keyspace.
package etcdanalyze

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"
	"go.etcd.io/etcd/api/v3/mvccpb"
)

// Space is one key space's totals.
type Space struct {
	Name string `json:"name"`
	// Keys live now; Revisions of all keys kept (live + old + tombstones).
	Keys      int `json:"keys"`
	Revisions int `json:"revisions"`
	// LiveBytes are the latest revisions of live keys; OldBytes every
	// other kept revision (what compaction would free).
	LiveBytes int64 `json:"liveBytes"`
	OldBytes  int64 `json:"oldBytes"`
}

// Total is LiveBytes + OldBytes.
func (s Space) Total() int64 { return s.LiveBytes + s.OldBytes }

// Report is an analysis.
type Report struct {
	Spaces []Space `json:"spaces"` // largest first
	// Keys: per key, its bytes (all revisions), for folded stacks.
	Keys map[string]int64 `json:"-"`
	// Revision is the snapshot's latest revision; Compacted how far
	// compaction had gone.
	Revision, Compacted int64
	Total               int64
}

type rev struct {
	main, sub int64
	tombstone bool
}

// revBytes decodes an MVCC revision key: 8-byte main, '_', 8-byte sub,
// and 't' for a tombstone.
func revBytes(b []byte) (rev, error) {
	if len(b) < 17 || b[8] != '_' {
		return rev{}, fmt.Errorf("not a revision key: %x", b)
	}
	return rev{main: int64(binary.BigEndian.Uint64(b[0:8])), sub: int64(binary.BigEndian.Uint64(b[9:17])), tombstone: len(b) == 18 && b[17] == 't'}, nil
}

// Analyze reads the snapshot at path (opened read-only).
func Analyze(path string) (*Report, error) {
	db, err := bolt.Open(path, 0o400, &bolt.Options{ReadOnly: true, Timeout: 5 * time.Second})
	if err != nil {
		return nil, fmt.Errorf("failed to open snapshot %s: %w", path, err)
	}
	defer db.Close()
	type keyState struct {
		latest    rev
		latestLen int64
		total     int64
		revs      int
	}
	keys := map[string]*keyState{}
	r := &Report{Keys: map[string]int64{}}
	err = db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte("key"))
		if b == nil {
			return fmt.Errorf("not an etcd v3 snapshot: no \"key\" bucket")
		}
		if m := tx.Bucket([]byte("meta")); m != nil {
			if v := m.Get([]byte("finishedCompactRev")); len(v) >= 17 {
				if cr, err := revBytes(v); err == nil {
					r.Compacted = cr.main
				}
			}
		}
		return b.ForEach(func(k, v []byte) error {
			rv, err := revBytes(k)
			if err != nil {
				return err
			}
			var kv mvccpb.KeyValue
			if err := kv.Unmarshal(v); err != nil {
				return fmt.Errorf("revision %d: %w", rv.main, err)
			}
			size := int64(len(k) + len(v))
			st := keys[string(kv.Key)]
			if st == nil {
				st = &keyState{}
				keys[string(kv.Key)] = st
			}
			st.revs++
			st.total += size
			if rv.main > st.latest.main || (rv.main == st.latest.main && rv.sub >= st.latest.sub) {
				st.latest, st.latestLen = rv, size
			}
			if rv.main > r.Revision {
				r.Revision = rv.main
			}
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("failed to read snapshot %s: %w", path, err)
	}
	spaces := map[string]*Space{}
	for k, st := range keys {
		name := SpaceOf(k)
		sp := spaces[name]
		if sp == nil {
			sp = &Space{Name: name}
			spaces[name] = sp
		}
		sp.Revisions += st.revs
		if st.latest.tombstone {
			sp.OldBytes += st.total
		} else {
			sp.Keys++
			sp.LiveBytes += st.latestLen
			sp.OldBytes += st.total - st.latestLen
		}
		r.Keys[k] = st.total
		r.Total += st.total
	}
	for _, sp := range spaces {
		r.Spaces = append(r.Spaces, *sp)
	}
	sort.Slice(r.Spaces, func(i, j int) bool {
		if r.Spaces[i].Total() != r.Spaces[j].Total() {
			return r.Spaces[i].Total() > r.Spaces[j].Total()
		}
		return r.Spaces[i].Name < r.Spaces[j].Name
	})
	return r, nil
}

// SpaceOf maps a key to its key space: /registry/<resource>/<namespace>
// for namespaced objects, /registry/<resource> for cluster-scoped ones;
// resources of API groups keep the group (/registry/<group>/<resource>/...).
// Keys outside /registry are grouped by their first segment.
func SpaceOf(key string) string {
	parts := strings.Split(strings.TrimPrefix(key, "/"), "/")
	if len(parts) < 2 || parts[0] != "registry" {
		return "/" + parts[0]
	}
	rest := parts[1:]
	res := rest[0]
	if strings.Contains(res, ".") && len(rest) > 2 { // a group: <group>/<resource>/...
		res, rest = rest[0]+"/"+rest[1], rest[1:]
	}
	// rest is now [resource, (namespace,) name]
	if len(rest) >= 3 {
		return "/registry/" + res + "/" + rest[1]
	}
	return "/registry/" + res
}

// WriteTable prints the top n key spaces (0: all).
func (r *Report) WriteTable(w io.Writer, n int) error {
	fmt.Fprintf(w, "snapshot revision %d, compacted to %d, %s in %d key spaces\n", r.Revision, r.Compacted, human(r.Total), len(r.Spaces))
	fmt.Fprintf(w, "%-60s %8s %9s %10s %10s %6s\n", "KEY SPACE", "KEYS", "REVISIONS", "LIVE", "OLD REVS", "SHARE")
	for i, s := range r.Spaces {
		if n > 0 && i == n {
			break
		}
		share := 0.0
		if r.Total > 0 {
			share = 100 * float64(s.Total()) / float64(r.Total)
		}
		fmt.Fprintf(w, "%-60s %8d %9d %10s %10s %5.1f%%\n", s.Name, s.Keys, s.Revisions, human(s.LiveBytes), human(s.OldBytes), share)
	}
	return nil
}

// WriteFolded writes folded stacks ("registry;pods;default;web-1 1234"),
// one line per key weighted by its bytes: the input of flame-graph tools.
func (r *Report) WriteFolded(w io.Writer) error {
	keys := make([]string, 0, len(r.Keys))
	for k := range r.Keys {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var buf bytes.Buffer
	for _, k := range keys {
		buf.WriteString(strings.ReplaceAll(strings.TrimPrefix(k, "/"), "/", ";"))
		fmt.Fprintf(&buf, " %d\n", r.Keys[k])
	}
	if _, err := w.Write(buf.Bytes()); err != nil {
		return fmt.Errorf("failed to write the folded stacks: %w", err)
	}
	return nil
}

func human(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1fGiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1fMiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1fKiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%dB", n)
}
