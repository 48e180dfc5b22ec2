// Package netdapi is the wire format between the trellis-cni plugin and
// netd in its AWS mode: JSON over HTTP on a Unix socket on the node. The
// plugin asks netd for a pod's address and wires the pod itself, as the
// AWS VPC CNI's plugin asks ipamd. It lives below daemons/ and cmd/
// because both ends speak it.
package netdapi

import "net/netip"

const (
	// AddPath assigns an address (POST Request, answers Address).
	AddPath = "/v1/cni/add"
	// DelPath releases it (POST Request, answers Address, zero when the
	// interface held none).
	DelPath = "/v1/cni/del"
	// DefaultSocket is where netd listens.
	DefaultSocket = "/run/trellis-netd/cni.sock"
)

// Request names a pod's interface as the container runtime does.
type Request struct {
	Container string `json:"container"`
	Iface     string `json:"iface"`
	Netns     string `json:"netns,omitempty"`
	// Namespace and Pod come from CNI_ARGS (K8S_POD_NAMESPACE,
	// K8S_POD_NAME).
	Namespace string `json:"namespace,omitempty"`
	Pod       string `json:"pod,omitempty"`
}

// Address is a pod's address and where it lives on the node.
type Address struct {
	IP netip.Addr `json:"ip"`
	// Table is the route table of the ENI that holds the address (its
	// device index plus one); 0 for the primary ENI, whose traffic takes
	// the main table.
	Table int `json:"table"`
	// MTU of the pod's interface.
	MTU int `json:"mtu"`
}

// Error is the body of a failed call.
type Error struct {
	Message string `json:"message"`
}
