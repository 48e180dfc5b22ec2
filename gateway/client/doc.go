// Package client talks to trellis-gateway: a small HTTP client over the
// gateway/api wire format, and the context file (gateway URL, CA,
// credentials) the trellis CLI reads instead of a kubeconfig.
package client
