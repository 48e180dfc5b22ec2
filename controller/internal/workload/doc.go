// Package workload is the one reconciler every Trellis workload kind runs
// under. It fetches the object, chooses its runtime profile, ensures the
// owned objects (concurrently, through controller/internal/apply), sets the
// Ready / Progressing / Degraded conditions, records events, and writes the
// status only when it changed.
//
// A kind supplies only what differs: a Kind (its types, what it owns, its
// pure translation) plus either an Observer (read the owned objects' state
// once they are ensured: TrellisService, TrellisCronJob, TrellisDaemon,
// TrellisStatefulSet) or a Planner (decide the pass from what it already
// owns: TrellisJobSet starts pending shards within its parallelism,
// TrellisTrainingJob stops and cleans up once its job has ended). Optional
// hooks, Immutable and Terminal, cover create-only objects and which
// translation errors are the spec's fault.
//
// Each kind lives in its own package, controller/<kind>/ (STYLE.md: one
// reconciler per kind, pure policy beside it with its own tests and golden
// files), rather than together in one package: the kinds share nothing but
// this package, and several export names of their own (shard labels, pod
// names, allowed namespaces) that tests and tools import.
package workload
