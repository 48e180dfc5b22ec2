package client

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"sigs.k8s.io/yaml"
)

// Context is the context file: where the gateway is, how to trust it,
// and who the caller is (a client certificate, or a token).
type Context struct {
	// Server is the gateway's URL, e.g. https://127.0.0.1:8443.
	Server string `json:"server"`
	// CertificateAuthority is a PEM file of the roots that signed the
	// gateway's serving certificate.
	CertificateAuthority string `json:"certificateAuthority,omitempty"`
	// ServerName overrides the TLS server name checked (when Server is an
	// IP address the certificate does not list).
	ServerName string `json:"serverName,omitempty"`
	// Namespace is the default namespace of commands.
	Namespace string `json:"namespace,omitempty"`
	// ClientCertificate and ClientKey are PEM files of a pod identity
	// certificate from the Trellis issuer (mTLS).
	ClientCertificate string `json:"clientCertificate,omitempty"`
	ClientKey         string `json:"clientKey,omitempty"`
	// Token or TokenFile is a bearer token (a ServiceAccount token for the
	// gateway's audience, or an OIDC token the cluster trusts).
	Token     string `json:"token,omitempty"`
	TokenFile string `json:"tokenFile,omitempty"`
}

// DefaultContextPath is $TRELLIS_CONTEXT, else
// $XDG_CONFIG_HOME/trellis/context.yaml (~/.config/trellis/context.yaml).
func DefaultContextPath() string {
	if p := os.Getenv("TRELLIS_CONTEXT"); p != "" {
		return p
	}
	d, err := os.UserConfigDir()
	if err != nil {
		d = "."
	}
	return filepath.Join(d, "trellis", "context.yaml")
}

// LoadContext reads a context file; relative file names in it are
// relative to the file.
func LoadContext(path string) (*Context, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("failed to read the gateway context %s: %w", path, err)
	}
	var c Context
	if err := yaml.UnmarshalStrict(b, &c); err != nil {
		return nil, fmt.Errorf("gateway context %s: %w", path, err)
	}
	if c.Server == "" {
		return nil, fmt.Errorf("gateway context %s: server is required", path)
	}
	dir := filepath.Dir(path)
	for _, f := range []*string{&c.CertificateAuthority, &c.ClientCertificate, &c.ClientKey, &c.TokenFile} {
		if *f != "" && !filepath.IsAbs(*f) {
			*f = filepath.Join(dir, *f)
		}
	}
	return &c, nil
}

// Save writes the context file (0600: it may hold a token).
func (c *Context) Save(path string) error {
	b, err := yaml.Marshal(c)
	if err != nil {
		return fmt.Errorf("failed to encode context file %s: %w", path, err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("failed to make the folder of context file %s: %w", path, err)
	}
	return os.WriteFile(path, b, 0o600)
}

// Client builds the client the context describes.
func (c *Context) Client() (*Client, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: c.ServerName}
	if c.CertificateAuthority != "" {
		pem, err := os.ReadFile(c.CertificateAuthority)
		if err != nil {
			return nil, fmt.Errorf("failed to read the gateway CA: %w", err)
		}
		tc.RootCAs = x509.NewCertPool()
		if !tc.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("gateway CA %s holds no PEM certificate", c.CertificateAuthority)
		}
	}
	if c.ClientCertificate != "" {
		// Re-read on each handshake: the cert sidecar rotates the files.
		certFile, keyFile := c.ClientCertificate, c.ClientKey
		tc.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			kp, err := tls.LoadX509KeyPair(certFile, keyFile)
			if err != nil {
				return nil, fmt.Errorf("failed to load the client certificate: %w", err)
			}
			return &kp, nil
		}
	}
	token := c.Token
	if c.TokenFile != "" {
		b, err := os.ReadFile(c.TokenFile)
		if err != nil {
			return nil, fmt.Errorf("failed to read the token file: %w", err)
		}
		token = strings.TrimSpace(string(b))
	}
	return &Client{
		Server:  strings.TrimSuffix(c.Server, "/"),
		Token:   token,
		HTTP:    &http.Client{Transport: &http.Transport{TLSClientConfig: tc, ForceAttemptHTTP2: true}, Timeout: 0},
		Timeout: 30 * time.Second,
	}, nil
}
