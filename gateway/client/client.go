package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/trellis-dev/trellis/gateway/api"
)

// Client calls the gateway.
type Client struct {
	Server string
	Token  string
	HTTP   *http.Client
	// Timeout bounds each call but Watch.
	Timeout time.Duration
}

// Error is a refused call: the HTTP code and the gateway's api.Error.
type Error struct {
	Code       int
	Body       api.Error
	RetryAfter string
}

func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s (%d): %s", e.Body.Reason, e.Code, e.Body.Message)
	for _, p := range e.Body.Problems {
		fmt.Fprintf(&b, "\n  - [%s]", p.Check)
		if p.Field != "" {
			fmt.Fprintf(&b, " %s:", p.Field)
		}
		fmt.Fprintf(&b, " %s", p.Message)
	}
	if e.RetryAfter != "" {
		fmt.Fprintf(&b, "\n  retry after %ss", e.RetryAfter)
	}
	return b.String()
}

// SubmitOptions are a submission's options.
type SubmitOptions struct {
	DryRun bool
	// ID is the submission id (idempotency).
	ID string
	// Signature is the api.HeaderSignature value (api.Sign).
	Signature string
}

// Submit sends one workload (YAML or JSON).
func (c *Client) Submit(ctx context.Context, body []byte, o SubmitOptions) (*api.SubmitResult, error) {
	u := c.Server + "/v1/workloads"
	if o.DryRun {
		u += "?" + api.QueryDryRun + "=true"
	}
	h := http.Header{"Content-Type": {"application/yaml"}}
	if o.ID != "" {
		h.Set(api.HeaderSubmissionID, o.ID)
	}
	if o.Signature != "" {
		h.Set(api.HeaderSignature, o.Signature)
	}
	var res api.SubmitResult
	return &res, c.do(ctx, http.MethodPost, u, h, body, &res)
}

// List lists a namespace's workloads (of one kind, when kind is set).
func (c *Client) List(ctx context.Context, ns, kind string) (*api.WorkloadList, error) {
	u := fmt.Sprintf("%s/v1/namespaces/%s/workloads", c.Server, url.PathEscape(ns))
	if kind != "" {
		u += "?kind=" + url.QueryEscape(kind)
	}
	var out api.WorkloadList
	return &out, c.do(ctx, http.MethodGet, u, nil, nil, &out)
}

// Quotas lists a namespace's ResourceQuotas and their usage.
func (c *Client) Quotas(ctx context.Context, ns string) (*api.QuotaList, error) {
	var out api.QuotaList
	return &out, c.do(ctx, http.MethodGet, fmt.Sprintf("%s/v1/namespaces/%s/quotas", c.Server, url.PathEscape(ns)), nil, nil, &out)
}

// Status returns a workload's conditions, pods and events.
func (c *Client) Status(ctx context.Context, ns, kind, name string) (*api.Status, error) {
	var out api.Status
	return &out, c.do(ctx, http.MethodGet, c.path(ns, kind, name)+"/status", nil, nil, &out)
}

// Events returns a workload's events.
func (c *Client) Events(ctx context.Context, ns, kind, name string) (*api.EventList, error) {
	var out api.EventList
	return &out, c.do(ctx, http.MethodGet, c.path(ns, kind, name)+"/events", nil, nil, &out)
}

// Get returns a workload as stored (JSON).
func (c *Client) Get(ctx context.Context, ns, kind, name string) (json.RawMessage, error) {
	var out json.RawMessage
	return out, c.do(ctx, http.MethodGet, c.path(ns, kind, name), nil, nil, &out)
}

// Watch calls fn for each event of the namespace's workloads until ctx
// ends or the stream does.
func (c *Client) Watch(ctx context.Context, ns, kind string, fn func(api.WatchEvent)) error {
	u := fmt.Sprintf("%s/v1/namespaces/%s/watch", c.Server, url.PathEscape(ns))
	if kind != "" {
		u += "?kind=" + url.QueryEscape(kind)
	}
	req, err := c.request(ctx, http.MethodGet, u, nil, nil)
	if err != nil {
		return err
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return fmt.Errorf("watch %s: %w", u, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return decodeError(resp)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var e api.WatchEvent
		if err := json.Unmarshal([]byte(data), &e); err != nil {
			return fmt.Errorf("bad watch event: %w", err)
		}
		fn(e)
	}
	if ctx.Err() != nil {
		return nil
	}
	return sc.Err()
}

func (c *Client) path(ns, kind, name string) string {
	return fmt.Sprintf("%s/v1/namespaces/%s/workloads/%s/%s", c.Server, url.PathEscape(ns), url.PathEscape(kind), url.PathEscape(name))
}

func (c *Client) request(ctx context.Context, method, u string, h http.Header, body []byte) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, method, u, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("failed to build the request %s %s: %w", method, u, err)
	}
	for k, v := range h {
		req.Header[k] = v
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	return req, nil
}

func (c *Client) do(ctx context.Context, method, u string, h http.Header, body []byte, out any) error {
	if c.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.Timeout)
		defer cancel()
	}
	req, err := c.request(ctx, method, u, h, body)
	if err != nil {
		return err
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, u, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		return decodeError(resp)
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("bad answer from %s: %w", u, err)
	}
	return nil
}

func decodeError(resp *http.Response) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	e := &Error{Code: resp.StatusCode, RetryAfter: resp.Header.Get("Retry-After")}
	if err := json.Unmarshal(b, &e.Body); err != nil || e.Body.Reason == "" {
		e.Body.Reason, e.Body.Message = http.StatusText(resp.StatusCode), strings.TrimSpace(string(b))
	}
	return e
}
