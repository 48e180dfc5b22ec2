package console

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"

	"github.com/trellis-dev/trellis/gateway"
	"github.com/trellis-dev/trellis/gateway/api"
)

// identity is the gateway identity of a session: the same user name and
// groups the apiserver gives the same person's OIDC token, so the
// gateway's SubjectAccessReview decides as the apiserver would.
func (s *Session) identity() *gateway.Identity {
	return &gateway.Identity{User: s.User, Groups: append(append([]string{}, s.Groups...), "system:authenticated"), Method: "oidc"}
}

// call runs one gateway API request in process as the session's identity
// and decodes its JSON answer into out (or its api.Error).
func (c *Console) call(r *http.Request, s *Session, method, target string, body []byte, out any) (int, *api.Error, error) {
	req := httptest.NewRequestWithContext(gateway.WithIdentity(r.Context(), s.identity()), method, target, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/yaml")
	rec := httptest.NewRecorder()
	c.cfg.API.ServeHTTP(rec, req)
	b, _ := io.ReadAll(rec.Body)
	if rec.Code >= 300 {
		e := &api.Error{}
		if err := json.Unmarshal(b, e); err != nil {
			return rec.Code, nil, fmt.Errorf("gateway answered %d: %s", rec.Code, b)
		}
		return rec.Code, e, nil
	}
	if err := json.Unmarshal(b, out); err != nil {
		return rec.Code, nil, fmt.Errorf("failed to decode the gateway's answer to %s %s: %w", method, target, err)
	}
	return rec.Code, nil, nil
}

func gatewayContext(r *http.Request, s *Session) context.Context {
	return gateway.WithIdentity(r.Context(), s.identity())
}
