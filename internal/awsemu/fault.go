package awsemu

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
)

// FaultCode is the error code of every refused call.
const FaultCode = "TrellisInjectedFault"

// FaultProxy forwards to an emulator over real HTTP, counts the calls by
// action and refuses the ones it is told to, with the AWS error shape of
// the call's protocol (EC2 query, query, JSON, S3 REST), status 400 (403
// for S3): errors an SDK does not retry.
type FaultProxy struct {
	URL string
	srv *http.Server
	ln  net.Listener

	mu       sync.Mutex
	refuse   map[string]int    // action -> calls left to refuse (<0: all)
	codes    map[string]string // action -> the code its refusals carry (default FaultCode)
	throttle map[string]int    // action -> calls left to throttle (<0: all)
	hold     map[string]chan struct{}
	calls    map[string]int
}

// ThrottleCode is the error code of a throttled EC2 call, as EC2 sends it.
const ThrottleCode = "RequestLimitExceeded"

// NewFaultProxy listens on loopback in front of target.
func NewFaultProxy(target string) (*FaultProxy, error) {
	u, err := url.Parse(target)
	if err != nil {
		return nil, fmt.Errorf("fault proxy target %q: %w", target, err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("fault proxy: %w", err)
	}
	p := &FaultProxy{URL: "http://" + ln.Addr().String(), ln: ln, refuse: map[string]int{}, codes: map[string]string{}, throttle: map[string]int{},
		hold: map[string]chan struct{}{}, calls: map[string]int{}}
	rp := httputil.NewSingleHostReverseProxy(u)
	p.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		action, proto, err := identify(r)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		switch p.count(action) {
		case verdictRefuse:
			writeFault(w, proto, action, p.code(action))
			return
		case verdictThrottle:
			writeThrottle(w, proto, action)
			return
		}
		if held := p.takeHold(action); held != nil {
			// The emulator does the call; its answer waits until the
			// caller goes away (a process killed between a change and
			// its record of it).
			rec := httptest.NewRecorder()
			rp.ServeHTTP(rec, r)
			close(held)
			<-r.Context().Done()
			return
		}
		rp.ServeHTTP(w, r)
	})}
	go func() { _ = p.srv.Serve(ln) }()
	return p, nil
}

// Refuse makes the next n calls of action fail (n < 0: every call until
// Clear). Actions are API names (CreateAutoScalingGroup, GetParameter) or,
// for S3, "S3:" and the method (S3:PUT).
func (p *FaultProxy) Refuse(action string, n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.refuse[action] = n
}

// RefuseWith is Refuse with the error code the cloud answers, for a
// caller that treats some codes apart (kops's route task waits, as for a
// fi.TryAgainLaterError, while CreateRoute answers
// InvalidNatGatewayID.NotFound).
func (p *FaultProxy) RefuseWith(action, code string, n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.refuse[action] = n
	p.codes[action] = code
}

func (p *FaultProxy) code(action string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if c, ok := p.codes[action]; ok {
		return c
	}
	return FaultCode
}

// Throttle answers the next n calls of action (n < 0: every call until
// Clear) with a throttling error, status 503, as EC2 does: an error SDKs
// and Trellis's clients retry after a backoff.
func (p *FaultProxy) Throttle(action string, n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.throttle[action] = n
}

// Hold lets the next call of action through to the emulator and never
// answers it: the returned channel closes once the emulator has done the
// call, and the caller waits until it gives up or is killed.
func (p *FaultProxy) Hold(action string) <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	ch := make(chan struct{})
	p.hold[action] = ch
	return ch
}

func (p *FaultProxy) takeHold(action string) chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	ch := p.hold[action]
	delete(p.hold, action)
	return ch
}

// Clear refuses, throttles and holds nothing any more.
func (p *FaultProxy) Clear() {
	p.mu.Lock()
	defer p.mu.Unlock()
	clear(p.refuse)
	clear(p.codes)
	clear(p.throttle)
	clear(p.hold)
}

// Calls returns how many calls of each action arrived (refused included).
func (p *FaultProxy) Calls() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[string]int, len(p.calls))
	for k, v := range p.calls {
		out[k] = v
	}
	return out
}

// ResetCalls zeroes the counts.
func (p *FaultProxy) ResetCalls() {
	p.mu.Lock()
	defer p.mu.Unlock()
	clear(p.calls)
}

// Close stops the proxy.
func (p *FaultProxy) Close() error { return p.srv.Close() }

type verdict int

const (
	verdictPass verdict = iota
	verdictRefuse
	verdictThrottle
)

func (p *FaultProxy) count(action string) verdict {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls[action]++
	if take(p.refuse, action) {
		return verdictRefuse
	}
	if take(p.throttle, action) {
		return verdictThrottle
	}
	return verdictPass
}

// take spends one of action's faults, if it has any left.
func take(left map[string]int, action string) bool {
	n, ok := left[action]
	switch {
	case !ok || n == 0:
		return false
	case n > 0:
		left[action] = n - 1
	}
	return true
}

type protocol int

const (
	protoQuery protocol = iota
	protoEC2
	protoJSON
	protoS3
)

// identify names a request's action without consuming its body.
func identify(r *http.Request) (string, protocol, error) {
	if t := r.Header.Get("X-Amz-Target"); t != "" {
		return t[strings.LastIndexByte(t, '.')+1:], protoJSON, nil
	}
	if r.Method == http.MethodPost && strings.HasPrefix(r.Header.Get("Content-Type"), "application/x-www-form-urlencoded") {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return "", 0, fmt.Errorf("read the request body: %w", err)
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		form, err := url.ParseQuery(string(body))
		if err != nil {
			return "", 0, fmt.Errorf("fault proxy: bad form body: %w", err)
		}
		if a := form.Get("Action"); a != "" {
			if form.Get("Version") == "2016-11-15" {
				return a, protoEC2, nil
			}
			return a, protoQuery, nil
		}
	}
	return "S3:" + r.Method, protoS3, nil
}

func writeThrottle(w http.ResponseWriter, proto protocol, action string) {
	msg := fmt.Sprintf("%s throttled by the test's fault proxy", action)
	if proto != protoEC2 {
		w.Header().Set("Content-Type", "text/xml")
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprintf(w, `<ErrorResponse><Error><Type>Sender</Type><Code>Throttling</Code><Message>%s</Message></Error><RequestId>fault</RequestId></ErrorResponse>`, msg)
		return
	}
	w.Header().Set("Content-Type", "text/xml")
	w.WriteHeader(http.StatusServiceUnavailable)
	fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><Response><Errors><Error><Code>%s</Code><Message>%s</Message></Error></Errors><RequestID>throttle</RequestID></Response>`, ThrottleCode, msg)
}

func writeFault(w http.ResponseWriter, proto protocol, action, code string) {
	msg := fmt.Sprintf("%s refused by the test's fault proxy", action)
	switch proto {
	case protoJSON:
		w.Header().Set("Content-Type", "application/x-amz-json-1.1")
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprintf(w, `{"__type":%q,"message":%q}`, code, msg)
	case protoEC2:
		w.Header().Set("Content-Type", "text/xml")
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><Response><Errors><Error><Code>%s</Code><Message>%s</Message></Error></Errors><RequestID>fault</RequestID></Response>`, code, msg)
	case protoS3:
		w.Header().Set("Content-Type", "application/xml")
		w.WriteHeader(http.StatusForbidden)
		fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>AccessDenied</Code><Message>%s</Message><RequestId>fault</RequestId></Error>`, msg)
	default:
		w.Header().Set("Content-Type", "text/xml")
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprintf(w, `<ErrorResponse><Error><Type>Sender</Type><Code>%s</Code><Message>%s</Message></Error><RequestId>fault</RequestId></ErrorResponse>`, code, msg)
	}
}
