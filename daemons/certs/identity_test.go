package certs_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spiffe/go-spiffe/v2/spiffeid"
	"github.com/spiffe/go-spiffe/v2/spiffetls/tlsconfig"
	"github.com/spiffe/go-spiffe/v2/svid/x509svid"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/trellis-dev/trellis/api/wellknown"
	"github.com/trellis-dev/trellis/internal/pki"
	"github.com/trellis-dev/trellis/sidecars/certs"
)

var (
	webID = spiffeid.RequireFromSegments(td, "ns", ns, "sa", "web")
	dbID  = spiffeid.RequireFromSegments(td, "ns", ns, "sa", "db")
)

// mtlsServer serves TLS from an identity dir, accepting only peer; each
// connection gets "hello from <its ID>".
func mtlsServer(t *testing.T, dir string, peer spiffeid.ID) string {
	t.Helper()
	src, err := certs.NewSource(dir)
	if err != nil {
		t.Fatal(err)
	}
	l, err := tls.Listen("tcp", "127.0.0.1:0", tlsconfig.MTLSServerConfig(src, src, tlsconfig.AuthorizeID(peer)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(5 * time.Second))
				_, _ = c.Write([]byte("hello\n"))
			}()
		}
	}()
	return l.Addr().String()
}

// dial connects with the identity of dir, insisting on the server's ID.
func dial(src *certs.Source, addr string, server spiffeid.ID, now func() time.Time) error {
	cfg := tlsconfig.MTLSClientConfig(src, src, tlsconfig.AuthorizeID(server))
	if now != nil {
		// go-spiffe verifies on the real clock; verify on the skewed one.
		cfg.VerifyPeerCertificate = func(raw [][]byte, _ [][]*x509.Certificate) error {
			id, _, err := x509svid.ParseAndVerify(raw, src, x509svid.WithTime(now()))
			if err != nil {
				return err
			}
			if id != server {
				return fmt.Errorf("unexpected ID %s", id)
			}
			return nil
		}
	}
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, cfg)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	b, err := io.ReadAll(c)
	if err != nil {
		return err
	}
	if string(b) != "hello\n" {
		return io.ErrUnexpectedEOF
	}
	return nil
}

func waitIdentity(t *testing.T, dir string) *certs.Identity {
	t.Helper()
	if err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 20*time.Second, true, func(context.Context) (bool, error) {
		return certs.Check(dir, time.Now()) == nil, nil
	}); err != nil {
		t.Fatalf("no identity in %s after 20s", dir)
	}
	id, err := certs.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func TestIntegrationPodIdentity(t *testing.T) {
	e := newEnv(t, time.Hour)
	webDir, dbDir := e.sidecar("web-1"), e.sidecar("db-1")
	web, db := waitIdentity(t, webDir), waitIdentity(t, dbDir)

	t.Run("identity from the pod object", func(t *testing.T) {
		if web.ID != webID || db.ID != dbID {
			t.Fatalf("IDs %s and %s, want %s and %s", web.ID, db.ID, webID, dbID)
		}
		leaf := web.Chain[0]
		if len(leaf.DNSNames) != 1 || leaf.DNSNames[0] != "web.shop.svc.cluster.local" {
			t.Errorf("DNS names %v, want [web.shop.svc.cluster.local]", leaf.DNSNames)
		}
		// The validity the issuer chose, not what is left of it: the time
		// left depends on when this line runs (issue 45).
		if life, want := leaf.NotAfter.Sub(leaf.NotBefore), time.Hour+5*time.Minute; life != want {
			t.Errorf("validity %s (%s to %s), want the TTL 1h plus the default backdate 5m", life, leaf.NotBefore, leaf.NotAfter)
		}
		fi, err := os.Stat(filepath.Join(webDir, wellknown.IdentityKeyFile)) // follows the symlinks
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("key mode %v, want 0600", fi.Mode().Perm())
		}
	})

	t.Run("openssl verifies the chain", func(t *testing.T) {
		cert := filepath.Join(webDir, wellknown.IdentityCertFile)
		out, err := exec.Command("openssl", "verify", "-CAfile", filepath.Join(webDir, wellknown.IdentityBundleFile), "-untrusted", cert, cert).CombinedOutput()
		if err != nil || !strings.Contains(string(out), ": OK") {
			t.Fatalf("openssl verify: %v\n%s", err, out)
		}
		// A root of another authority does not verify it (the check can fail).
		other, err := pki.NewRoot("elsewhere.test", time.Hour, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		otherPEM := filepath.Join(t.TempDir(), "other.pem")
		if err := os.WriteFile(otherPEM, pki.EncodeCerts(other.Cert), 0o644); err != nil {
			t.Fatal(err)
		}
		out, err = exec.Command("openssl", "verify", "-CAfile", otherPEM, "-untrusted", cert, cert).CombinedOutput()
		if err == nil {
			t.Fatalf("openssl verified the chain against another root:\n%s", out)
		}
	})

	t.Run("mTLS checks the peer's SPIFFE ID", func(t *testing.T) {
		addr := mtlsServer(t, webDir, dbID)
		dbSrc, err := certs.NewSource(dbDir)
		if err != nil {
			t.Fatal(err)
		}
		if err := dial(dbSrc, addr, webID, nil); err != nil {
			t.Fatalf("db -> web: %v", err)
		}
		if err := dial(dbSrc, addr, dbID, nil); err == nil {
			t.Fatal("the client accepted a server that is not the ID it wanted")
		}
		webSrc, err := certs.NewSource(webDir)
		if err != nil {
			t.Fatal(err)
		}
		if err := dial(webSrc, addr, webID, nil); err == nil {
			t.Fatal("the server accepted web, but only db is authorized")
		}
	})

	t.Run("a peer with a slow clock accepts a fresh certificate", func(t *testing.T) {
		addr := mtlsServer(t, webDir, dbID)
		dbSrc, _ := certs.NewSource(dbDir)
		slow := func() time.Time { return time.Now().Add(-3 * time.Minute) }
		if err := dial(dbSrc, addr, webID, slow); err != nil {
			t.Fatalf("client 3 minutes slow: %v", err)
		}
		fast := func() time.Time { return web.Chain[0].NotAfter.Add(time.Minute) }
		if err := dial(dbSrc, addr, webID, fast); err == nil {
			t.Fatal("a client whose clock is past the expiry accepted the certificate")
		}
	})

	t.Run("the trust bundle is published in every namespace", func(t *testing.T) {
		for _, n := range []string{"default", "shop", "trellis-system"} {
			e.eventually("bundle in "+n, 10*time.Second, func() bool { return bundleIn(e, n) == string(certsPEM(t, e.root.Cert)) })
		}
	})

	t.Run("attestation refuses impostors", func(t *testing.T) {
		for _, tc := range []struct {
			name, uid, want string
		}{
			{"a host process", "", "403"},
			{"a pod on another node", string(e.pods["far-1"].UID), "403"},
			{"a pod that does not exist", "0d7e3b4a-3c4f-4bb1-9a57-3a8e6c1f0f00", "403"},
			{"a real pod of this node", string(e.pods["web-1"].UID), "200"},
		} {
			got := e.callAs(typesUID(tc.uid), e.socket, 1)[0]
			if !strings.HasPrefix(got, tc.want+" ") {
				t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
			}
		}
	})
}

func certsPEM(t *testing.T, cs ...*x509.Certificate) []byte {
	t.Helper()
	var out []byte
	for _, c := range cs {
		out = append(out, pemCert(c)...)
	}
	return out
}
