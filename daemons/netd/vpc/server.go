package vpc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/trellis-dev/trellis/internal/netdapi"
)

// Handler answers the trellis-cni plugin: addresses from the pool.
func (p *Pool) Handler(mtu int) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+netdapi.AddPath, func(w http.ResponseWriter, r *http.Request) {
		req, ok := decode(w, r)
		if !ok {
			return
		}
		if req.Namespace == "" || req.Pod == "" {
			// The collector keeps an address only while its pod exists.
			fail(w, http.StatusBadRequest, errors.New("the pod's namespace and name are required (CNI_ARGS K8S_POD_NAMESPACE, K8S_POD_NAME)"))
			return
		}
		a, err := p.Assign(r.Context(), Key{Container: req.Container, Iface: req.Iface, Pod: req.Namespace + "/" + req.Pod})
		if err != nil {
			p.log.Warn("CNI ADD failed", "container", req.Container, "pod", req.Namespace+"/"+req.Pod, "err", err)
			fail(w, http.StatusServiceUnavailable, err)
			return
		}
		reply(w, address(a, mtu))
	})
	mux.HandleFunc("POST "+netdapi.DelPath, func(w http.ResponseWriter, r *http.Request) {
		req, ok := decode(w, r)
		if !ok {
			return
		}
		a, err := p.Release(req.Container, req.Iface)
		if err != nil {
			fail(w, http.StatusInternalServerError, err)
			return
		}
		if a == nil {
			reply(w, netdapi.Address{})
			return
		}
		reply(w, address(*a, mtu))
	})
	return mux
}

func address(a Assignment, mtu int) netdapi.Address {
	table := 0
	if a.Device > 0 {
		table = a.Device + 1
	}
	return netdapi.Address{IP: a.IP, Table: table, MTU: mtu}
}

func decode(w http.ResponseWriter, r *http.Request) (netdapi.Request, bool) {
	var req netdapi.Request
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<16)).Decode(&req); err != nil {
		fail(w, http.StatusBadRequest, fmt.Errorf("bad request: %w", err))
		return req, false
	}
	if req.Container == "" || req.Iface == "" {
		fail(w, http.StatusBadRequest, errors.New("container and iface are required"))
		return req, false
	}
	return req, true
}

func reply(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

func fail(w http.ResponseWriter, code int, err error) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(netdapi.Error{Message: err.Error()})
}

// ServeSocket serves h on a Unix socket at path (only root may connect)
// until ctx ends.
func ServeSocket(ctx context.Context, path string, h http.Handler, log *slog.Logger) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("make the socket directory: %w", err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("stale socket %s: %w", path, err)
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", path, err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return fmt.Errorf("restrict the socket to root: %w", err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	log.Info("serving the CNI plugin", "socket", path)
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve on %s: %w", path, err)
	}
	return nil
}
