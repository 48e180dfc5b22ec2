package api

import (
	"encoding/json"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Problem is one reason a submission is refused.
type Problem struct {
	// Check that found it: decode, schema, validation, provenance,
	// signature, quota.
	Check string `json:"check"`
	// Field is the path in the workload, e.g.
	// spec.template.containers[0].image.
	Field   string `json:"field,omitempty"`
	Message string `json:"message"`
}

// Error is the body of every 4xx and 5xx answer.
type Error struct {
	// Reason is a stable word: Unauthorized, Forbidden, Invalid,
	// TooLarge, Conflict, TooManyRequests, NotFound, Internal.
	Reason  string `json:"reason"`
	Message string `json:"message"`
	// Problems lists every problem found, when the workload was refused.
	Problems []Problem `json:"problems,omitempty"`
}

// CheckResult says how one check went.
type CheckResult struct {
	Name string `json:"name"`
	// Result is passed, refused or skipped.
	Result string `json:"result"`
}

// Check results.
const (
	CheckPassed  = "passed"
	CheckRefused = "refused"
	CheckSkipped = "skipped"
)

// Actions of a SubmitResult.
const (
	ActionCreated   = "created"
	ActionUpdated   = "updated"
	ActionUnchanged = "unchanged"
)

// SubmitResult is the answer to an accepted submission.
type SubmitResult struct {
	Kind            string `json:"kind"`
	Namespace       string `json:"namespace"`
	Name            string `json:"name"`
	ResourceVersion string `json:"resourceVersion,omitempty"`
	Generation      int64  `json:"generation,omitempty"`
	// Action is created, updated or unchanged (what it would be, on a dry
	// run).
	Action       string `json:"action"`
	DryRun       bool   `json:"dryRun,omitempty"`
	SubmissionID string `json:"submissionID,omitempty"`
	// Replayed: the submission id was seen before with this body; this is
	// the first submission's result, nothing was written.
	Replayed bool `json:"replayed,omitempty"`
	// Diff is, on a dry run, what would change (- running, + submitted).
	Diff     string        `json:"diff,omitempty"`
	Checks   []CheckResult `json:"checks"`
	Warnings []string      `json:"warnings,omitempty"`
	// Placement is the fleet's PropagationPolicy (namespace/name) a placed
	// submission wrote or would write; empty for this cluster.
	Placement string `json:"placement,omitempty"`
	// FieldManager is the server-side apply field manager (the caller).
	FieldManager string `json:"fieldManager,omitempty"`
}

// Workload is the summary of one workload.
type Workload struct {
	Kind            string    `json:"kind"`
	Namespace       string    `json:"namespace"`
	Name            string    `json:"name"`
	ResourceVersion string    `json:"resourceVersion"`
	Generation      int64     `json:"generation"`
	Created         time.Time `json:"created"`
	// Ready is the Ready condition's status (True, False, Unknown) and
	// Reason its reason.
	Ready  string `json:"ready"`
	Reason string `json:"reason,omitempty"`
	// ObservedGeneration is the generation the controller last acted on.
	ObservedGeneration int64 `json:"observedGeneration"`
	// Image is the template's container images, comma separated.
	Image string `json:"image,omitempty"`
	// LastEvent is the workload's most recent event, in a list or a watch
	// event answered to a caller who may list events in the namespace (nil
	// otherwise, and in a DELETED watch event).
	LastEvent *Event `json:"lastEvent,omitempty"`
}

// WorkloadList is the answer of RouteList.
type WorkloadList struct {
	Items []Workload `json:"items"`
	// EventsHidden is why the items carry no last event: the caller may
	// not list events in the namespace (the refusal, as the API words it).
	EventsHidden string `json:"eventsHidden,omitempty"`
}

// Pod is one pod of a workload.
type Pod struct {
	Name     string `json:"name"`
	Phase    string `json:"phase"`
	Ready    bool   `json:"ready"`
	Node     string `json:"node,omitempty"`
	Restarts int32  `json:"restarts"`
	// Reason is why a container waits or ended (ImagePullBackOff, ...).
	Reason string `json:"reason,omitempty"`
	// Registered is the pod's trellis.dev/registered readiness gate (True,
	// False, Unknown), empty for a pod without it; RegisteredMessage is
	// the registrar's word on it (the znode, or why not).
	Registered        string `json:"registered,omitempty"`
	RegisteredMessage string `json:"registeredMessage,omitempty"`
	// Identity is the pod's SPIFFE ID, from its namespace and service
	// account (the ID its certificates carry).
	Identity string `json:"identity,omitempty"`
	// IdentityNotBefore and IdentityNotAfter are the validity of the pod's
	// identity certificate as the issuer last recorded it on the pod
	// (zero until it has, or when the record does not parse).
	IdentityNotBefore time.Time `json:"identityNotBefore,omitzero"`
	IdentityNotAfter  time.Time `json:"identityNotAfter,omitzero"`
}

// Event is one Kubernetes event about a workload.
type Event struct {
	Time    time.Time `json:"time"`
	Type    string    `json:"type"`
	Reason  string    `json:"reason"`
	Message string    `json:"message"`
	Count   int32     `json:"count"`
}

// EventList is the answer of RouteEvents.
type EventList struct {
	Items []Event `json:"items"`
}

// Status is the answer of RouteStatus.
type Status struct {
	Workload   Workload           `json:"workload"`
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// Detail is the kind's whole status as stored.
	Detail json.RawMessage `json:"detail,omitempty"`
	Pods   []Pod           `json:"pods"`
	Events []Event         `json:"events"`
}

// Watch event types.
const (
	WatchAdded    = "ADDED"
	WatchModified = "MODIFIED"
	WatchDeleted  = "DELETED"
)

// WatchEvent is one server-sent event of RouteWatch.
type WatchEvent struct {
	Type     string   `json:"type"`
	Workload Workload `json:"workload"`
	// EventsHidden is why the workload carries no last event, as in
	// WorkloadList.
	EventsHidden string `json:"eventsHidden,omitempty"`
}

// Quota is one ResourceQuota of a namespace: its hard limits and what is
// used, as Kubernetes quantities.
type Quota struct {
	Name string            `json:"name"`
	Hard map[string]string `json:"hard"`
	Used map[string]string `json:"used"`
	// Schedule is the forecast plan's schedule annotation, when the
	// quota has one (trellis quota apply writes it).
	Schedule string `json:"schedule,omitempty"`
}

// QuotaList is the answer of RouteQuotas.
type QuotaList struct {
	Items []Quota `json:"items"`
}
