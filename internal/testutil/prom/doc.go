// Package prom runs Debian's real Prometheus for tests, on history
// backfilled by its promtool, so that a test's PromQL is evaluated by
// Prometheus itself.
package prom
