package api

// Routes of the gateway, as net/http patterns. Every route but the probes
// needs an authenticated caller (mTLS client certificate from the Trellis
// issuer, or a bearer token the cluster's TokenReview accepts).
const (
	// RouteSubmit takes one workload (YAML or JSON, at most MaxBody bytes).
	// Query dryRun=true runs every check and returns the diff, writing
	// nothing. Answers SubmitResult (201 created, 200 otherwise) or Error.
	RouteSubmit = "POST /v1/workloads"
	// RouteList lists a namespace's workloads (query kind= narrows to one
	// kind): WorkloadList.
	RouteList = "GET /v1/namespaces/{namespace}/workloads"
	// RouteGet returns one workload as stored (managed fields stripped).
	// {kind} is the kind, its plural resource name or its lower case.
	RouteGet = "GET /v1/namespaces/{namespace}/workloads/{kind}/{name}"
	// RouteStatus returns the workload's Status: conditions, pods, events.
	RouteStatus = "GET /v1/namespaces/{namespace}/workloads/{kind}/{name}/status"
	// RouteEvents returns the workload's events, oldest first: EventList.
	RouteEvents = "GET /v1/namespaces/{namespace}/workloads/{kind}/{name}/events"
	// RouteWatch streams WatchEvents as server-sent events (event: the
	// type, data: the JSON), for a namespace (query kind= narrows).
	RouteWatch = "GET /v1/namespaces/{namespace}/watch"
	// RouteQuotas lists a namespace's ResourceQuotas with their usage
	// (for a caller who may list resourcequotas there): QuotaList.
	RouteQuotas = "GET /v1/namespaces/{namespace}/quotas"

	RouteHealthz = "GET /healthz"
	RouteReadyz  = "GET /readyz"
	RouteMetrics = "GET /metrics"
)

// Request headers.
const (
	// HeaderSubmissionID is the client's submission id: a retried
	// submission with the same id (in the namespace) returns the first
	// result; the same id with a different body is refused with 409.
	HeaderSubmissionID = "Trellis-Submission-Id"
	// HeaderSignature is "<key name>:<base64 ed25519 signature>" over
	// Canonical(body).
	HeaderSignature = "Trellis-Signature"
	// QueryDryRun "true" makes a submission a dry run.
	QueryDryRun = "dryRun"
	// QueryMinResourceVersion on a read of one workload waits (briefly)
	// until the gateway's cache holds that resourceVersion or a newer one,
	// so a read from another replica sees a write it did not make.
	QueryMinResourceVersion = "minResourceVersion"
)

// MaxBody is the largest submission body, 1 MiB.
const MaxBody = 1 << 20

// Annotations the gateway sets on what it writes.
const (
	AnnotationSubmissionID     = "gateway.trellis.dev/submission-id"
	AnnotationSubmissionDigest = "gateway.trellis.dev/submission-digest"
	AnnotationSubmittedBy      = "gateway.trellis.dev/submitted-by"
)
