// Command trellis-traffic is the traffic sidecar: it registers its pod in
// the ZooKeeper serverset while the app passes its health check, and on
// SIGTERM deregisters, drains, then exits.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/trellis-dev/trellis/api/wellknown"
	"github.com/trellis-dev/trellis/internal/serverset"
	"github.com/trellis-dev/trellis/sidecars/traffic"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintf(os.Stderr, "trellis-traffic: %v\n", err)
		os.Exit(1)
	}
}

func run() error {
	service := flag.String("service", os.Getenv(wellknown.EnvService), "serverset service")
	env := flag.String("env", os.Getenv(wellknown.EnvEnvironment), "serverset environment")
	ports := flag.String("ports", "", "name:port,... (the first is the service endpoint)")
	host := flag.String("host", os.Getenv(wellknown.EnvPodIP), "address clients use")
	check := flag.String("check", "", "health check: http://host:port/path or tcp://host:port (default: tcp to the first port)")
	servers := flag.String("zookeeper", "", "comma-separated ZooKeeper ensemble")
	root := flag.String("root", "/discovery", "znode under which serversets live")
	digestFile := flag.String("digest-file", "", "file holding user:password for the serverset ACL")
	drain := flag.Duration("drain", 5*time.Second, "wait after deregistering before exiting")
	flag.Parse()
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil)).With("component", "traffic", "service", *service)

	if *ports == "" {
		return fmt.Errorf("--ports is required")
	}
	parsed, err := wellknown.ParsePorts(*ports)
	if err != nil {
		return fmt.Errorf("bad --ports: %w", err)
	}
	named := make(map[string]serverset.Endpoint, len(parsed))
	for _, p := range parsed {
		named[p.Name] = serverset.Endpoint{Host: *host, Port: p.Port}
	}
	first := parsed[0].Name
	var c traffic.Check
	switch {
	case strings.HasPrefix(*check, "http://"), strings.HasPrefix(*check, "https://"):
		c = traffic.HTTPCheck(*check, time.Second)
	case strings.HasPrefix(*check, "tcp://"):
		c = traffic.TCPCheck(strings.TrimPrefix(*check, "tcp://"), time.Second)
	case *check == "":
		c = traffic.TCPCheck(fmt.Sprintf("127.0.0.1:%d", named[first].Port), time.Second)
	default:
		return fmt.Errorf("bad --check %q", *check)
	}
	digest, err := serverset.ReadDigest(*digestFile)
	if err != nil {
		return err
	}
	reg := serverset.New(serverset.Config{Servers: strings.Split(*servers, ","), Root: *root, Digest: digest, Logger: log})
	s, err := traffic.New(traffic.Config{
		Check: c, Registry: reg, Key: "self", Drain: *drain, Logger: log,
		Registration: serverset.Registration{Service: *service, Env: *env, Member: serverset.Member{ServiceEndpoint: named[first], AdditionalEndpoints: named}},
	})
	if err != nil {
		return err
	}
	sig, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// The registrar outlives the sidecar loop so the final deregistration
	// reaches ZooKeeper before the session closes.
	regCtx, regCancel := context.WithCancel(context.Background())
	var g errgroup.Group
	g.Go(func() error { return reg.Run(regCtx) })
	err = s.Run(sig)
	regCancel()
	return errors.Join(err, g.Wait())
}
