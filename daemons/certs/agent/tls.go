package agent

import (
	"crypto/tls"
	"fmt"

	"github.com/spiffe/go-spiffe/v2/bundle/x509bundle"
	"github.com/spiffe/go-spiffe/v2/spiffeid"
	"github.com/spiffe/go-spiffe/v2/spiffetls/tlsconfig"
)

// IssuerTLS verifies the issuer against the trust bundle file (reread on
// every handshake, so a CA rotation is picked up) and its SPIFFE ID.
func IssuerTLS(td spiffeid.TrustDomain, bundlePath string, id spiffeid.ID) *tls.Config {
	return tlsconfig.TLSClientConfig(fileBundle{td: td, path: bundlePath}, tlsconfig.AuthorizeID(id))
}

type fileBundle struct {
	td   spiffeid.TrustDomain
	path string
}

func (f fileBundle) GetX509BundleForTrustDomain(td spiffeid.TrustDomain) (*x509bundle.Bundle, error) {
	if td != f.td {
		return nil, fmt.Errorf("no bundle for trust domain %q", td)
	}
	return x509bundle.Load(td, f.path)
}
