// Package liveset counts what a ZooKeeper client can really use of a
// serverset, for watchers in integration and e2e tests: a member is live
// when its znode is ephemeral, its owner session is connected to the
// ensemble, and its host:port is the address of a Ready pod. A stale member
// (a dead registrar's session not yet expired, or a pod that is gone) does
// not keep the count up. It also holds the sample accounting those watchers
// assert on (a minimum sample rate, at most 1% errored samples) and the
// contiguity check of numbered log lines.
package liveset
