package gateway

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/trellis-dev/trellis/gateway/api"
)

// request is one API call being answered: its audit record, written once
// when the answer is.
type request struct {
	g     *Gateway
	w     http.ResponseWriter
	r     *http.Request
	start time.Time
	// api adds up the apiserver round trips made for the request; cache
	// is how long it waited for the informer cache (Server-Timing).
	api   *apiTimer
	cache time.Duration
	rec   AuditRecord
	id    *Identity
	done  bool
}

// Handlers read q.r, whose context carries the apiserver timer.
func (g *Gateway) newRequest(w http.ResponseWriter, r *http.Request, action string) *request {
	ctx, at := withAPITimer(r.Context())
	return &request{g: g, w: w, r: r.WithContext(ctx), start: time.Now(), api: at, rec: AuditRecord{Action: action, Namespace: r.PathValue("namespace")}}
}

// authenticate sets the caller or answers 401.
func (q *request) authenticate() bool {
	id, err := q.g.authn.Authenticate(q.r)
	if err != nil {
		code, reason := http.StatusUnauthorized, "Unauthorized"
		if !errors.Is(err, ErrUnauthenticated) {
			code, reason = http.StatusServiceUnavailable, "Unavailable"
		}
		q.fail(code, reason, err.Error(), nil)
		return false
	}
	q.id = id
	q.rec.User, q.rec.Method, q.rec.SPIFFEID = id.User, id.Method, id.SPIFFEID
	return true
}

// authorize answers 403 unless the caller may do verb on resource.
func (q *request) authorize(namespace, resource, verb string) bool {
	if err := q.g.authz.Authorize(q.r.Context(), q.id, namespace, resource, verb); err != nil {
		q.authzFailed(err)
		return false
	}
	return true
}

// authorizeCore is authorize for a core-group resource (pods, events,
// resourcequotas).
func (q *request) authorizeCore(namespace, resource, verb string) bool {
	if err := q.coreAccess(namespace, resource, verb); err != nil {
		q.authzFailed(err)
		return false
	}
	return true
}

// coreAccess is authorizeCore's SubjectAccessReview without the answer:
// nil, an error wrapping ErrForbidden, or the review's failure.
func (q *request) coreAccess(namespace, resource, verb string) error {
	return q.g.authz.AuthorizeGroup(q.r.Context(), q.id, namespace, "", resource, verb)
}

// authzFailed answers 403 for a refusal, 503 when the review failed.
func (q *request) authzFailed(err error) {
	code, reason := http.StatusForbidden, "Forbidden"
	if !errors.Is(err, ErrForbidden) {
		code, reason = http.StatusServiceUnavailable, "Unavailable"
	}
	q.fail(code, reason, err.Error(), nil)
}

// fail answers an api.Error and audits the refusal.
func (q *request) fail(code int, reason, msg string, probs []api.Problem) {
	q.rec.Decision = "refused"
	if code >= 500 {
		q.rec.Decision = "failed"
	}
	q.rec.Reason, q.rec.Message, q.rec.Problems = reason, msg, probs
	q.respond(code, api.Error{Reason: reason, Message: msg, Problems: probs})
}

// ok answers v and audits the acceptance.
func (q *request) ok(code int, v any) {
	q.rec.Decision = "accepted"
	q.respond(code, v)
}

func (q *request) respond(code int, v any) {
	if q.done {
		return
	}
	q.done = true
	api, n := q.api.total()
	q.w.Header().Set(HeaderServerTiming, serverTiming(time.Since(q.start), api, n, q.cache))
	q.w.Header().Set("Content-Type", "application/json")
	q.w.WriteHeader(code)
	_ = json.NewEncoder(q.w).Encode(v)
	q.finish(code)
}

// finish audits the request and counts it.
func (q *request) finish(code int) {
	q.rec.Time = q.g.cfg.Clock.Now().UTC()
	q.rec.Code = code
	lat := time.Since(q.start)
	q.rec.LatencyMS = float64(lat.Microseconds()) / 1000
	q.g.audit.Record(&q.rec)
	q.g.metrics.requests.WithLabelValues(q.rec.Action, strconv.Itoa(code)).Inc()
	q.g.metrics.latency.WithLabelValues(q.rec.Action).Observe(lat.Seconds())
	api, _ := q.api.total()
	q.g.metrics.overhead.WithLabelValues(q.rec.Action).Observe((lat - api - q.cache).Seconds())
}

func problemsMessage(probs []api.Problem) string {
	if len(probs) == 1 {
		return "the workload was refused: 1 problem"
	}
	return fmt.Sprintf("the workload was refused: %d problems", len(probs))
}
