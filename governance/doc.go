// Package governance holds what keeps the load Trellis and its users create
// in check: the etcd keyspace analyser (etcdanalyze), and the tests that
// hold every Trellis component to client discipline (watches only in
// steady state).
package governance
