// Package serverset registers service members in ZooKeeper in the
// ServerSet format clients discover services with:
// <root>/<service>/<env>/member_<sequence>, EPHEMERAL_SEQUENTIAL, holding
// {"serviceEndpoint":{"host":..,"port":..},"additionalEndpoints":{..},
// "status":"ALIVE","shard":N}.
//
// The Registrar is level-triggered: callers set the members that should be
// registered; a loop makes ZooKeeper match, on every change, every session
// event and a periodic verify. It survives session expiry (members are
// re-created with fresh data), znodes left by a dead session (deleted and
// re-created) and a server that lost its data (the client is rebuilt).
//
// It lives in internal/, below daemons/ and sidecars/, because both the node
// registrar daemon (daemons/zkregistrar) and the traffic sidecar
// (sidecars/traffic) register members with it, and cli/zk, the benchmarks and
// the tests read serversets with it: a daemon's subpackage made the sidecar
// depend on a daemon. It is internal rather than a top-level package because
// only this module uses it as Go; the format itself, what clients depend
// on, is the JSON above and does not need an exported Go API.
package serverset
