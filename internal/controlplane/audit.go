package controlplane

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"
)

// AuditEvent is the part of an audit log line request counting needs.
type AuditEvent struct {
	Stage     string    `json:"stage"`
	Verb      string    `json:"verb"`
	UserAgent string    `json:"userAgent"`
	Received  time.Time `json:"requestReceivedTimestamp"`
	// Completed is when the stage was reached (the response, for
	// ResponseComplete): Completed - Received is the request's latency.
	Completed time.Time `json:"stageTimestamp"`
	ObjectRef *struct {
		Resource    string `json:"resource"`
		Subresource string `json:"subresource"`
	} `json:"objectRef"`
	// ResponseStatus carries the HTTP code: a 409 is a write that lost a
	// conflict and will be retried.
	ResponseStatus *struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
}

// Code is the request's HTTP status code, 0 when the log has none.
func (e AuditEvent) Code() int {
	if e.ResponseStatus == nil {
		return 0
	}
	return e.ResponseStatus.Code
}

// Resource is the resource (and subresource) a request was about.
func (e AuditEvent) Resource() string {
	if e.ObjectRef == nil {
		return ""
	}
	if e.ObjectRef.Subresource != "" {
		return e.ObjectRef.Resource + "/" + e.ObjectRef.Subresource
	}
	return e.ObjectRef.Resource
}

// ReadAudit returns the requests whose user agent starts with uaPrefix and
// that were received in [from, to). A watch is logged when its response
// starts; everything else when it completes.
func (cp *ControlPlane) ReadAudit(uaPrefix string, from, to time.Time) ([]AuditEvent, error) {
	f, err := os.Open(cp.AuditLogPath())
	if err != nil {
		return nil, fmt.Errorf("failed to open audit log: %w", err)
	}
	defer f.Close()
	var out []AuditEvent
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var e AuditEvent
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			return nil, fmt.Errorf("bad audit line: %w", err)
		}
		if !strings.HasPrefix(e.UserAgent, uaPrefix) || e.Received.Before(from) || !e.Received.Before(to) {
			continue
		}
		if (e.Verb == "watch" && e.Stage == "ResponseStarted") || (e.Verb != "watch" && e.Stage == "ResponseComplete") {
			out = append(out, e)
		}
	}
	return out, sc.Err()
}

// CountByVerb counts events by verb (and resource for writes).
func CountByVerb(events []AuditEvent) map[string]int {
	m := map[string]int{}
	for _, e := range events {
		m[e.Verb]++
	}
	return m
}
