package certs

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/trellis-dev/trellis/api/wellknown"
)

// Main is the trellis-cert command: "run" (the sidecar), "once" (obtain a
// certificate and exit: the init-container mode) and "check" (the startup
// probe). It returns the exit code.
func Main(args []string, stderr io.Writer) int {
	usage := "usage: trellis-cert [run|once|check] [flags]"
	if len(args) == 0 || len(args[0]) > 0 && args[0][0] == '-' {
		args = append([]string{"run"}, args...) // the injected sidecar passes flags only
	}
	if len(args) < 1 {
		fmt.Fprintln(stderr, usage)
		return 2
	}
	fs := flag.NewFlagSet("trellis-cert "+args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	socket := fs.String("agent-socket", wellknown.PathCertAgent+"/"+wellknown.CertAgentSocket, "the node agent's Unix socket")
	dir := fs.String("out", wellknown.PathIdentity, "directory for key.pem, cert.pem and bundle.pem")
	checkDir := fs.String("dir", wellknown.PathIdentity, "directory to check (check)")
	refresh := fs.Duration("bundle-refresh", time.Minute, "how often to refetch the trust bundle between renewals")
	timeout := fs.Duration("timeout", 2*time.Minute, "give up after this long (once)")
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	log := slog.New(slog.NewJSONHandler(stderr, nil)).With("component", "cert-sidecar")
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	s := New(Config{Socket: *socket, Dir: *dir, BundleRefresh: *refresh, Logger: log})
	switch args[0] {
	case "run":
		if err := s.Run(ctx); err != nil {
			log.Error("sidecar failed", "err", err)
			return 1
		}
	case "once":
		ctx, cancel := context.WithTimeout(ctx, *timeout)
		defer cancel()
		if err := s.Once(ctx); err != nil {
			log.Error("no certificate", "err", err)
			return 1
		}
	case "check":
		if err := Check(*checkDir, time.Now()); err != nil {
			fmt.Fprintf(stderr, "trellis-cert check: %v\n", err)
			return 1
		}
	default:
		fmt.Fprintln(stderr, usage)
		return 2
	}
	return 0
}
