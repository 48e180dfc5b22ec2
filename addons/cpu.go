package addons

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/resource"
)

// kindCPUDivisor and kindCPUFloor make a kind cluster's CPU requests: a
// tenth of production's, at least 10m.
//
// A kind node's CPUs are the host's, shared by every node and by the
// host's own work, and a request there only steers the scheduler. With
// production's requests the runtime alone reserved 1,660m of the 2,000m a
// 2-core laptop's control-plane node offers, the one node of the general
// pool, and a workload submitted through the gateway stayed Pending.
// Limits are production's everywhere, so a runaway is still capped.
const (
	kindCPUDivisor = 10
	kindCPUFloor   = 10 // millicores
)

// CPU is the CPU request of a runtime container, as a template asks for
// it: {{.CPU "200m"}}. It is production unchanged, or on kind
// (TokenCPU) a tenth of it, at least 10m.
func (v Values) CPU(production string) (string, error) {
	q, err := resource.ParseQuantity(production)
	if err != nil {
		return "", fmt.Errorf("CPU request %q: %w", production, err)
	}
	if !v.TokenCPU {
		return production, nil
	}
	m := max(q.MilliValue()/kindCPUDivisor, kindCPUFloor)
	return fmt.Sprintf("%dm", m), nil
}
