// Package api is the wire format of trellis-gateway's HTTP API: the routes,
// headers and JSON bodies shared by the gateway, the trellis CLI and any
// other client (the web console). docs/user/gateway.md documents it.
package api
