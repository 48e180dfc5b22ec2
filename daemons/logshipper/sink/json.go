package sink

import (
	"slices"
	"strconv"
	"unicode/utf8"
)

// AppendJSON appends r as one JSON object, the same as encoding/json
// produces for Record (field names, omitempty, sorted label keys), without
// reflection: the shipper's hottest path. TestAppendJSONMatchesEncodingJSON
// holds it to encoding/json's output.
func (r *Record) AppendJSON(b []byte) []byte {
	var times timeWriter
	return r.appendJSON(b, &times)
}

// appendJSON is AppendJSON, writing the time with times: a sink keeps one
// for its records.
func (r *Record) appendJSON(b []byte, times *timeWriter) []byte {
	b = append(b, `{"time":"`...)
	b = times.append(b, r.Time)
	b = append(b, `","stream":`...)
	b = AppendString(b, r.Stream)
	b = append(b, `,"log":`...)
	b = AppendString(b, r.Log)
	switch id := r.Identity; {
	case id == nil:
	case id.rendered != nil:
		b = append(b, id.rendered...)
	default:
		b = id.AppendIdentity(b)
	}
	if r.Truncated {
		b = append(b, `,"truncated":true`...)
	}
	if r.Malformed {
		b = append(b, `,"malformed":true`...)
	}
	if g := r.Gap; g != nil {
		b = append(b, `,"gap":{"file":`...)
		b = AppendString(b, g.File)
		b = append(b, `,"inode":`...)
		b = strconv.AppendUint(b, g.Inode, 10)
		b = append(b, `,"from":`...)
		b = strconv.AppendInt(b, g.From, 10)
		b = append(b, `,"to":`...)
		b = strconv.AppendInt(b, g.To, 10)
		b = append(b, `,"bytes":`...)
		b = strconv.AppendInt(b, g.Bytes, 10)
		b = append(b, `,"reason":`...)
		b = AppendString(b, g.Reason)
		b = append(b, '}')
	}
	return append(b, '}')
}

// AppendIdentity appends the identity, the fields from namespace to
// labels as AppendJSON writes them (with a leading comma): the same for
// every line of a pod's container, so the shipper renders it once per pod
// version (Render) instead of sorting and escaping the labels again for
// every line.
func (id *Identity) AppendIdentity(b []byte) []byte {
	b = append(b, `,"namespace":`...)
	b = AppendString(b, id.Namespace)
	b = append(b, `,"pod":`...)
	b = AppendString(b, id.Pod)
	b = append(b, `,"container":`...)
	b = AppendString(b, id.Container)
	b = append(b, `,"uid":`...)
	b = AppendString(b, id.UID)
	for _, f := range [...]struct{ k, v string }{{`,"node":`, id.Node}, {`,"service":`, id.Service}, {`,"env":`, id.Env}} {
		if f.v != "" {
			b = append(b, f.k...)
			b = AppendString(b, f.v)
		}
	}
	if w := id.Workload; w != nil {
		b = append(b, `,"workload":{"kind":`...)
		b = AppendString(b, w.Kind)
		b = append(b, `,"name":`...)
		b = AppendString(b, w.Name)
		b = append(b, '}')
	}
	if len(id.Labels) > 0 {
		b = append(b, `,"labels":{`...)
		keys := make([]string, 0, len(id.Labels))
		for k := range id.Labels {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for i, k := range keys {
			if i > 0 {
				b = append(b, ',')
			}
			b = AppendString(b, k)
			b = append(b, ':')
			b = AppendString(b, id.Labels[k])
		}
		b = append(b, '}')
	}
	return b
}

// Render renders the identity once, for AppendJSON to copy into every
// record that has it. The identity must not change afterwards.
func (id *Identity) Render() { id.rendered = id.AppendIdentity(nil) }

const hex = "0123456789abcdef"

// plain marks the bytes AppendString copies as they are: printable ASCII
// but for '"', '\\', '<', '>' and '&'. One table load per byte instead of
// seven comparisons: the log message is most of every record's bytes.
var plain = func() (t [256]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\' && c != '<' && c != '>' && c != '&'
	}
	return t
}()

// AppendString appends s as a JSON string the way encoding/json does:
// invalid UTF-8 becomes U+FFFD, <, > and & and U+2028/2029 are escaped.
// The records use it, and so does the shipper's checkpoint.
func AppendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		// Eight plain bytes at a time (the log message is mostly plain):
		// none has its high bit set, none is below 0x20, none is '"',
		// '\\', '<', '>' or '&'. '<' and '>' differ only in bit 1, '"'
		// and '&' only in bit 2, so each pair is one comparison with that
		// bit set. The subtractions find a byte below 0x20 or a zero byte
		// of a comparison exactly when no byte is 0x80 or above, which
		// the first term tests (TestAppendStringWords). Written in the
		// loop: the compiler would not inline it as a function.
		for ; i+8 <= len(s); i += 8 {
			w := s[i : i+8]
			x := uint64(w[0]) | uint64(w[1])<<8 | uint64(w[2])<<16 | uint64(w[3])<<24 |
				uint64(w[4])<<32 | uint64(w[5])<<40 | uint64(w[6])<<48 | uint64(w[7])<<56
			angle, quoteAmp, bs := (x|lows*0x02)^(lows*'>'), (x|lows*0x04)^(lows*'&'), x^(lows*'\\')
			if (x|(x-lows*0x20)&^x|(angle-lows)&^angle|(quoteAmp-lows)&^quoteAmp|(bs-lows)&^bs)&highs != 0 {
				break
			}
		}
		if i >= len(s) {
			break
		}
		c := s[i]
		if plain[c] {
			i++
			continue
		}
		if c < utf8.RuneSelf {
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// Masks for AppendString's word test: a byte's low and high bit in each of eight bytes.
const (
	lows  = 0x0101010101010101
	highs = 0x8080808080808080
)
