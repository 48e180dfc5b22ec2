package etcdanalyze

import (
	"encoding/xml"
	"fmt"
	"io"
	"sort"
	"strings"
)

// node is a frame of the flame graph: a key path prefix and its bytes.
type node struct {
	name     string
	value    int64
	children map[string]*node
}

func (r *Report) tree() *node {
	root := &node{name: "etcd", children: map[string]*node{}}
	for k, v := range r.Keys {
		n := root
		n.value += v
		parts := strings.Split(strings.TrimPrefix(k, "/"), "/")
		// Stop at the key space level plus the object name: deeper frames
		// are too narrow to read.
		if len(parts) > 5 {
			parts = append(parts[:4], strings.Join(parts[4:], "/"))
		}
		for _, p := range parts {
			c := n.children[p]
			if c == nil {
				c = &node{name: p, children: map[string]*node{}}
				n.children[p] = c
			}
			c.value += v
			n = c
		}
	}
	return root
}

// WriteSVG renders the keyspace as a flame graph (an icicle: the root on
// top, each frame as wide as its bytes), with a tooltip per frame.
func (r *Report) WriteSVG(w io.Writer) error {
	const width, rowH = 1200.0, 18.0
	root := r.tree()
	depth := 0
	var measure func(n *node, d int)
	measure = func(n *node, d int) {
		depth = max(depth, d)
		for _, c := range n.children {
			measure(c, d+1)
		}
	}
	measure(root, 1)
	height := float64(depth)*rowH + 40
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" font-family="monospace" font-size="11">`+"\n", width, height)
	fmt.Fprintf(&b, `<text x="4" y="14">etcd keyspace: %s, revision %d</text>`+"\n", esc(human(r.Total)), r.Revision)
	var draw func(n *node, x, scale float64, d int)
	draw = func(n *node, x, scale float64, d int) {
		wpx := float64(n.value) * scale
		if wpx < 0.5 {
			return
		}
		y := 24 + float64(d)*rowH
		hue := 20 + (len(n.name)*37)%40
		fmt.Fprintf(&b, `<g><title>%s (%s)</title><rect x="%.2f" y="%.1f" width="%.2f" height="%.1f" fill="hsl(%d,85%%,60%%)" stroke="white" stroke-width="0.5"/>`,
			esc(n.name), esc(human(n.value)), x, y, wpx, rowH-1, hue)
		if wpx > 40 {
			label := n.name
			if maxc := int(wpx / 7); len(label) > maxc {
				label = label[:max(maxc-2, 0)] + ".."
			}
			fmt.Fprintf(&b, `<text x="%.2f" y="%.1f">%s</text>`, x+3, y+13, esc(label))
		}
		b.WriteString("</g>\n")
		names := make([]string, 0, len(n.children))
		for k := range n.children {
			names = append(names, k)
		}
		sort.Slice(names, func(i, j int) bool { return n.children[names[i]].value > n.children[names[j]].value })
		cx := x
		for _, k := range names {
			c := n.children[k]
			draw(c, cx, scale, d+1)
			cx += float64(c.value) * scale
		}
	}
	scale := 0.0
	if root.value > 0 {
		scale = width / float64(root.value)
	}
	draw(root, 0, scale, 0)
	b.WriteString("</svg>\n")
	if _, err := io.WriteString(w, b.String()); err != nil {
		return fmt.Errorf("failed to write the flame graph: %w", err)
	}
	return nil
}

func esc(s string) string {
	var b strings.Builder
	_ = xml.EscapeText(&b, []byte(s))
	return b.String()
}
