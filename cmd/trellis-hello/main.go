// Command trellis-hello is the sample workload of config/samples and the
// end-to-end tests: an HTTP server on --port that answers with the greeting
// rendered by the config init container and logs every request, and, when
// the pod holds a Trellis identity, an mTLS server on --mtls-port that
// requires and names its peer's identity. Run as `trellis-hello get URL` or
// `trellis-hello mtls HOST:PORT` (kubectl exec) it is the client. Run as
// `trellis-hello wait-for FILE` it is a batch task that runs until FILE
// exists, which `trellis-hello touch FILE` (kubectl exec) creates: a test
// decides when the task ends.
package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/trellis-dev/trellis/api/wellknown"
)

func main() {
	if len(os.Args) > 2 && (os.Args[1] == "get" || os.Args[1] == "mtls") {
		if err := client(os.Args[1], os.Args[2]); err != nil {
			fmt.Fprintf(os.Stderr, "trellis-hello %s: %v\n", os.Args[1], err)
			os.Exit(1)
		}
		return
	}
	if len(os.Args) > 2 && (os.Args[1] == "wait-for" || os.Args[1] == "touch") {
		if err := task(os.Args[1], os.Args[2]); err != nil {
			fmt.Fprintf(os.Stderr, "trellis-hello %s: %v\n", os.Args[1], err)
			os.Exit(1)
		}
		return
	}
	port := flag.Int("port", 8080, "HTTP port")
	mtlsPort := flag.Int("mtls-port", 8443, "mTLS port (when the pod has an identity)")
	tickEvery := flag.Duration("tick", 0, "also log a numbered line at this interval, and a final one on SIGTERM (a test counts them in the log sink)")
	flag.Parse()
	if *tickEvery > 0 {
		go tick(*tickEvery)
	}
	if err := serve(*port, *mtlsPort); err != nil {
		fmt.Fprintf(os.Stderr, "trellis-hello: %v\n", err)
		os.Exit(1)
	}
}

func serve(port, mtlsPort int) error {
	pod := os.Getenv(wellknown.EnvPodName)
	greeting, err := os.ReadFile(filepath.Join(wellknown.PathConfig, "greeting.txt"))
	if err != nil {
		greeting = []byte("hello\n")
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		fmt.Printf("hello: %s %s from %s\n", r.Method, r.URL.Path, r.RemoteAddr)
		fmt.Fprintf(w, "%s from %s\n", greeting[:len(greeting)-1], pod)
	})
	errs := make(chan error, 2)
	go func() { errs <- http.ListenAndServe(fmt.Sprintf(":%d", port), mux) }()
	fmt.Printf("hello: serving HTTP on :%d as %s\n", port, pod)
	if _, err := os.Stat(filepath.Join(wellknown.PathIdentity, wellknown.IdentityCertFile)); err == nil {
		cfg := &tls.Config{
			MinVersion: tls.VersionTLS13, ClientAuth: tls.RequireAndVerifyClientCert,
			GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return loadCert() },
			GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
				roots, err := loadRoots()
				if err != nil {
					return nil, err
				}
				return &tls.Config{MinVersion: tls.VersionTLS13, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: roots,
					GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return loadCert() }}, nil
			},
		}
		mtls := http.NewServeMux()
		mtls.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
			peer := r.TLS.PeerCertificates[0]
			fmt.Printf("hello: mTLS request from %s\n", uris(peer))
			fmt.Fprintf(w, "%s greets %s\n", pod, uris(peer))
		})
		srv := &http.Server{Addr: fmt.Sprintf(":%d", mtlsPort), Handler: mtls, TLSConfig: cfg, ReadHeaderTimeout: 10 * time.Second}
		go func() { errs <- srv.ListenAndServeTLS("", "") }()
		fmt.Printf("hello: serving mTLS on :%d\n", mtlsPort)
	}
	return <-errs
}

// loadCert reads the identity the certificate sidecar keeps fresh.
func loadCert() (*tls.Certificate, error) {
	c, err := tls.LoadX509KeyPair(filepath.Join(wellknown.PathIdentity, wellknown.IdentityCertFile), filepath.Join(wellknown.PathIdentity, wellknown.IdentityKeyFile))
	if err != nil {
		return nil, fmt.Errorf("load the identity from %s: %w", wellknown.PathIdentity, err)
	}
	return &c, nil
}

func loadRoots() (*x509.CertPool, error) {
	pem, err := os.ReadFile(filepath.Join(wellknown.PathIdentity, wellknown.IdentityBundleFile))
	if err != nil {
		return nil, fmt.Errorf("read the trust bundle: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, errors.New("no roots in bundle.pem")
	}
	return pool, nil
}

func uris(c *x509.Certificate) string {
	if len(c.URIs) == 0 {
		return c.Subject.CommonName
	}
	return c.URIs[0].String()
}

func client(mode, target string) error {
	hc := &http.Client{Timeout: 10 * time.Second}
	url := target
	if mode == "mtls" {
		cert, err := loadCert()
		if err != nil {
			return err
		}
		roots, err := loadRoots()
		if err != nil {
			return err
		}
		var peer string
		hc.Transport = &http.Transport{TLSClientConfig: &tls.Config{
			MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{*cert}, RootCAs: roots,
			// Trellis certificates name SPIFFE IDs, not the pod's IP: check
			// the chain, then report the peer's ID.
			InsecureSkipVerify: true,
			VerifyPeerCertificate: func(raw [][]byte, _ [][]*x509.Certificate) error {
				certs := make([]*x509.Certificate, len(raw))
				for i, r := range raw {
					c, err := x509.ParseCertificate(r)
					if err != nil {
						return fmt.Errorf("parse the peer's certificate %d: %w", i, err)
					}
					certs[i] = c
				}
				inter := x509.NewCertPool()
				for _, c := range certs[1:] {
					inter.AddCert(c)
				}
				if _, err := certs[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter}); err != nil {
					return fmt.Errorf("verify the peer %s: %w", uris(certs[0]), err)
				}
				peer = uris(certs[0])
				return nil
			},
		}}
		url = "https://" + target + "/"
		defer func() { fmt.Printf("peer: %s\n", peer) }()
	}
	resp, err := hc.Get(url)
	if err != nil {
		return fmt.Errorf("get %s: %w", url, err)
	}
	defer resp.Body.Close()
	if _, err := io.Copy(os.Stdout, resp.Body); err != nil {
		return fmt.Errorf("read the answer of %s: %w", url, err)
	}
	return nil
}

// tick logs "tick N" every interval; on SIGTERM it logs "tick N final"
// and exits, so a reader of the shipped logs can tell a complete stream
// (1..N, then final) from one that lost lines.
func tick(every time.Duration) {
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	t := time.NewTicker(every)
	for n := 1; ; n++ {
		select {
		case <-t.C:
			fmt.Printf("tick %d\n", n)
		case <-term:
			fmt.Printf("tick %d final\n", n)
			os.Exit(0)
		}
	}
}

// task is the batch mode: wait-for polls until file exists; touch creates
// it.
func task(cmd, file string) error {
	if cmd == "touch" {
		return os.WriteFile(file, nil, 0o644)
	}
	fmt.Printf("task: running until %s exists\n", file)
	start := time.Now()
	for {
		if _, err := os.Stat(file); err == nil {
			fmt.Printf("task: released after %s\n", time.Since(start).Round(time.Second))
			return nil
		}
		time.Sleep(200 * time.Millisecond)
	}
}
