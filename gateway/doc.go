// Package gateway is trellis-gateway: the submission gateway and platform
// API application engineers use instead of kube-apiserver. It
// authenticates callers (mTLS with the Trellis issuer's certificates, or a
// bearer token through TokenReview), authorizes them with
// SubjectAccessReviews against the cluster's RBAC, checks a submitted
// workload (schema and the admission webhook's validation, image
// provenance, signature, quota, rate), writes it by server-side apply with
// the caller as field manager, and serves reads from an informer cache.
// Every decision is one JSON line on the audit stream.
package gateway
