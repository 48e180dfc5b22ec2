// Package pki is Trellis's one public-key infrastructure library: P-256
// keys and CSRs, CA and leaf certificates, PEM encoding, fsync'd writes of
// keys, and the certificate authority of pod identities: the trusted roots
// (the trust bundle), the signing CA that issues leaf certificates, and CA
// rotation with overlap (a new root is trusted before it signs, and the old
// one stays trusted until every leaf it signed has expired).
//
// The cluster bootstrap keeps a cluster's root in the kops state store and
// seeds the issuer's CA Secret with State; the certificate issuer daemon
// signs with it; the certificate sidecar parses and writes what it gets; the
// test control plane makes its apiserver's CA and serving certificate with
// it. It imports nothing of Trellis but internal/fsync.
package pki
