package logshipper

import (
	"encoding/base64"
	"encoding/json"
	"strconv"
)

// appendCheckpoint appends the positions as encoding/json encodes a
// checkpoint holding them, without reflection or a copy of the map: it runs
// after every acknowledged batch (json.Marshal and the copy were 2% of the
// shipper's CPU in the production bench).
// TestAppendCheckpointMatchesEncodingJSON holds it to encoding/json.
func appendCheckpoint(b []byte, positions map[string]Position) []byte {
	b = append(b, `{"positions":[`...)
	first := true
	for _, p := range positions {
		if !first {
			b = append(b, ',')
		}
		first = false
		b = p.appendJSON(b)
	}
	return append(b, "]}"...)
}

func (p *Position) appendJSON(b []byte) []byte {
	b = append(b, `{"key":`...)
	b = appendJSONString(b, p.Key)
	if p.Seq != 0 {
		b = append(b, `,"seq":`...)
		b = strconv.AppendUint(b, p.Seq, 10)
	}
	b = append(b, `,"dir":`...)
	b = appendJSONString(b, p.Dir)
	b = append(b, `,"path":`...)
	b = appendJSONString(b, p.Path)
	b = append(b, `,"inode":`...)
	b = strconv.AppendUint(b, p.Inode, 10)
	b = append(b, `,"offset":`...)
	b = strconv.AppendInt(b, p.Offset, 10)
	if p.Size != 0 {
		b = append(b, `,"size":`...)
		b = strconv.AppendInt(b, p.Size, 10)
	}
	if p.Done {
		b = append(b, `,"done":true`...)
	}
	if len(p.Head) > 0 {
		b = append(b, `,"head":"`...)
		b = base64.StdEncoding.AppendEncode(b, p.Head)
		b = append(b, '"')
	}
	return append(b, '}')
}

// appendJSONString appends s quoted. Printable ASCII that encoding/json
// leaves as it is (paths and keys, in practice) is copied; anything else
// is left to encoding/json, so the output is always the same as its.
func appendJSONString(b []byte, s string) []byte {
	for i := range len(s) {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s) // a string always encodes
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}
