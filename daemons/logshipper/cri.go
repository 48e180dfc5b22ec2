package logshipper

import (
	"bytes"
	"time"
)

// Entry is one CRI log line: "<RFC3339Nano time> <stream> <P|F> <message>".
type Entry struct {
	Time    time.Time
	Stream  string
	Partial bool
	Message []byte
	// Malformed: the line is not in the CRI format; Message is the raw
	// line and Stream is "unknown".
	Malformed bool
}

// ParseCRI parses one line (without its newline). It never fails: a line
// that is not in the CRI format comes back Malformed, so nothing is lost.
func ParseCRI(line []byte) Entry {
	return parseCRI(line, &timeParser{})
}

// parseCRI is ParseCRI, reading the time with times.
func parseCRI(line []byte, times *timeParser) Entry {
	bad := Entry{Stream: "unknown", Message: line, Malformed: true}
	sp := bytes.IndexByte(line, ' ')
	if sp < 0 {
		return bad
	}
	ts, err := times.parse(line[:sp])
	if err != nil {
		return bad
	}
	rest := line[sp+1:]
	sp = bytes.IndexByte(rest, ' ')
	if sp < 0 {
		return bad
	}
	stream := rest[:sp]
	if !bytes.Equal(stream, []byte("stdout")) && !bytes.Equal(stream, []byte("stderr")) {
		return bad
	}
	rest = rest[sp+1:]
	// The tag: P (partial) or F (full), possibly with more flags after ':'.
	sp = bytes.IndexByte(rest, ' ')
	var tag, msg []byte
	if sp < 0 {
		tag, msg = rest, nil // an empty message
	} else {
		tag, msg = rest[:sp], rest[sp+1:]
	}
	if len(tag) == 0 || (tag[0] != 'P' && tag[0] != 'F') {
		return bad
	}
	e := Entry{Time: ts, Partial: tag[0] == 'P', Message: msg}
	if stream[3] == 'o' {
		e.Stream = "stdout"
	} else {
		e.Stream = "stderr"
	}
	return e
}
