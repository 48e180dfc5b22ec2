// Command trellis-oidc-dev is the local cluster's OpenID Connect provider
// (package oidcdev): static users signing in with a password, one web
// client (the console). It is for development clusters only: its keys are
// new at every start, and it serves plain HTTP.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/trellis-dev/trellis/internal/oidcdev"
)

func main() {
	listen := flag.String("listen", ":5556", "HTTP listen address")
	config := flag.String("config", "/etc/trellis-oidc-dev/config.json", "JSON file: issuer, clientID, clientSecret, redirectURIs, users (id, password, email)")
	flag.Parse()
	if err := run(*listen, *config); err != nil {
		fmt.Fprintln(os.Stderr, "trellis-oidc-dev:", err)
		os.Exit(1)
	}
}

func run(listen, config string) error {
	cfg, err := oidcdev.LoadConfig(config)
	if err != nil {
		return err
	}
	h, err := oidcdev.New(cfg)
	if err != nil {
		return err
	}
	srv := &http.Server{Addr: listen, Handler: h, ReadHeaderTimeout: 10 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	slog.Info("serving", "listen", listen, "issuer", cfg.Issuer, "users", len(cfg.Users))
	if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve %s: %w", listen, err)
	}
	return nil
}
