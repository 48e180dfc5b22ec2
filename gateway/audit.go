package gateway

import (
	"encoding/json"
	"io"
	"sync"
	"time"

	"github.com/trellis-dev/trellis/gateway/api"
)

// AuditRecord is one decision of the gateway, one JSON line: who, what,
// which checks ran, and accepted or why not.
type AuditRecord struct {
	Time     time.Time `json:"time"`
	Decision string    `json:"decision"` // accepted, refused, failed
	Code     int       `json:"code"`
	// Who.
	User     string `json:"user,omitempty"`
	Method   string `json:"authMethod,omitempty"`
	SPIFFEID string `json:"spiffeID,omitempty"`
	// What.
	Action       string `json:"action"` // submit, dry-run, list, get, status, events, watch
	Namespace    string `json:"namespace,omitempty"`
	Kind         string `json:"kind,omitempty"`
	Name         string `json:"name,omitempty"`
	SubmissionID string `json:"submissionID,omitempty"`
	Digest       string `json:"digest,omitempty"`
	// Outcome.
	Checks          []api.CheckResult `json:"checks,omitempty"`
	Result          string            `json:"result,omitempty"` // created, updated, unchanged, replayed
	ResourceVersion string            `json:"resourceVersion,omitempty"`
	Reason          string            `json:"reason,omitempty"`
	Message         string            `json:"message,omitempty"`
	Problems        []api.Problem     `json:"problems,omitempty"`
	LatencyMS       float64           `json:"latencyMs"`
}

// Auditor writes audit records, one JSON line each, whole.
type Auditor struct {
	mu  sync.Mutex
	enc *json.Encoder
}

// NewAuditor writes to w (stdout in a pod: the node's log shipper ships it).
func NewAuditor(w io.Writer) *Auditor { return &Auditor{enc: json.NewEncoder(w)} }

// Record writes r.
func (a *Auditor) Record(r *AuditRecord) {
	a.mu.Lock()
	defer a.mu.Unlock()
	_ = a.enc.Encode(r)
}
