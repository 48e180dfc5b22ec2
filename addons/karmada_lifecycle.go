package addons

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/trellis-dev/trellis/bootstrap/definition"
)

// DefaultLifecycles are the lifecycles of the bundle's addons.
func DefaultLifecycles() []Lifecycle { return []Lifecycle{karmadaLifecycle{}} }

// karmadaLifecycle is the fleet control plane's (addons karmada-apiserver
// and karmada): its values, the etcd membership check, its certificates,
// and the quorum-aware roll of its members.
type karmadaLifecycle struct{}

var _ Lifecycle = karmadaLifecycle{}

func (karmadaLifecycle) Addons() []string { return []string{KarmadaAPIServerAddon, KarmadaAddon} }

// karmadaGOGC is fleet/karmada.DefaultGOGC (a test keeps them equal).
const karmadaGOGC = 300

// karmadaCPU are the fleet components' CPU requests on AWS.
var karmadaCPU = map[string]string{
	"etcd": "100m", "kube-apiserver": "250m", "aggregated-apiserver": "50m", "kube-controller-manager": "50m",
	"webhook": "50m", "install": "50m", "scheduler": "100m", "controller-manager": "200m",
}

// karmadaCPUKind are the token requests of a local management cluster.
func karmadaCPUKind() map[string]string {
	out := map[string]string{}
	for k := range karmadaCPU {
		out[k] = "10m"
	}
	return out
}

// Values are the fleet's:
//   - EtcdClaim keeps the fleet's etcd on a persistent volume (AWS); kind
//     clusters have no volume provisioner: an emptyDir, which lives as long
//     as the pod.
//   - CPU are the fleet components' CPU requests, by container: what a
//     management cluster reserves for them; on kind a token amount (the
//     local nodes' two CPUs are taken by the cluster's own addons).
//   - GOGC is the fleet's apiserver's and controllers' garbage collector
//     target (fleet/karmada.DefaultGOGC: why).
//   - Replicas are the fleet API's pods, each an etcd member
//     (definition.FleetReplicas); with more than one, PeerService names the
//     members and EtcdInitialCluster lists them.
//   - ControllerReplicas run each fleet controller (one leads, one waits)
//     and the webhook (stateless): 2 beside a replicated API, else 1.
func (karmadaLifecycle) Values(def *definition.ClusterDefinition) map[string]any {
	replicas, controllers := def.FleetReplicas(), 1
	if replicas > 1 {
		controllers = 2
	}
	cpu := karmadaCPU
	if def.Cloud == definition.CloudKind {
		cpu = karmadaCPUKind()
	}
	return map[string]any{
		"EtcdClaim": def.Cloud == definition.CloudAWS, "CPU": cpu, "GOGC": karmadaGOGC,
		"Replicas": replicas, "PeerService": KarmadaPeerService, "EtcdInitialCluster": karmadaInitialCluster(replicas),
		"ControllerReplicas": controllers,
	}
}

func (karmadaLifecycle) Check(ctx context.Context, a *Applier, rendered []Rendered) error {
	return a.checkFleetMembers(ctx, rendered)
}

// Seed creates the fleet's certificates once and renews them when due.
func (l karmadaLifecycle) Seed(ctx context.Context, a *Applier, rendered []Rendered) error {
	if !rendersAny(rendered, []string{KarmadaAPIServerAddon}) {
		return nil
	}
	now := a.clock().Now()
	secret, err := a.Client.CoreV1().Secrets(Namespace).Get(ctx, KarmadaSecret, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		data, err := karmadaPKI(now)
		if err != nil {
			return fmt.Errorf("fleet control plane certificates: %w", err)
		}
		return a.CreateSecret(ctx, KarmadaSecret, data)
	}
	if err != nil {
		return fmt.Errorf("failed to read secret %s: %w", KarmadaSecret, err)
	}
	return a.renewFleetPKI(ctx, secret, now)
}

// Finish replaces the fleet API's members (OnDelete) after every addon: the
// template may have changed with its addon or with a renewal of the
// certificates, and a roll an earlier apply left unfinished goes on.
func (karmadaLifecycle) Finish(ctx context.Context, a *Applier) ([]Result, error) {
	rolled, err := a.rollFleetMembers(ctx)
	var results []Result
	if len(rolled) > 0 {
		results = append(results, Result{Addon: KarmadaAPIServerAddon, Action: "members replaced", Objects: len(rolled)})
	}
	if err != nil {
		return results, fmt.Errorf("addon %s: %w", KarmadaAPIServerAddon, err)
	}
	return results, nil
}
