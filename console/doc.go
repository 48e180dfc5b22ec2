// Package console is the Trellis web console: server-rendered pages that
// a person signed in with OIDC uses instead of kubectl. Every page reads
// and writes through the gateway's own API handler, in process, as the
// signed-in identity: the same SubjectAccessReview, checks, audit, rate
// limit, informer cache and server-sent events as trellis submit.
package console
