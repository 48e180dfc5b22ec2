// Package certsapi is the wire format between the certificate sidecar, the
// node agent and the issuer: JSON over HTTP (a Unix socket between sidecar
// and agent, TLS between agent and issuer). It lives below daemons/ and
// sidecars/ because both ends of the sidecar's socket speak it.
package certsapi

const (
	// SignPath: the sidecar POSTs a PEM CSR to the agent; the agent POSTs a
	// SignRequest to the issuer. Both answer with a SignResponse.
	SignPath = "/v1/sign"
	// BundlePath answers with the current trust bundle (PEM).
	BundlePath = "/v1/bundle"
)

// SignRequest is what an agent asks the issuer for: a certificate for the
// pod it attested, with the CSR the pod made.
type SignRequest struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	UID       string `json:"uid"`
	CSR       []byte `json:"csr"` // PEM
}

// SignResponse carries the certificate chain (leaf first, PEM) and the
// trust bundle (PEM).
type SignResponse struct {
	Chain  []byte `json:"chain"`
	Bundle []byte `json:"bundle"`
	// SPIFFEID is the identity the issuer gave.
	SPIFFEID string `json:"spiffeID"`
}

// Error is the body of a refused request.
type Error struct {
	Error string `json:"error"`
}
