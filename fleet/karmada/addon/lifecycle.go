package addon

import (
	"context"
	"fmt"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/trellis-dev/trellis/addons"
	"github.com/trellis-dev/trellis/bootstrap/definition"
	"github.com/trellis-dev/trellis/fleet/karmada"
)

// Lifecycle is the fleet control plane's addons.Lifecycle (addons
// karmada-apiserver and karmada): its values, the etcd membership check,
// its certificates, and the quorum-aware roll of its members. Whoever
// builds the bundle passes it to addons.Render and the Applier.
type Lifecycle struct{}

var _ addons.Lifecycle = Lifecycle{}

func (Lifecycle) Addons() []string { return []string{KarmadaAPIServerAddon, KarmadaAddon} }

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
//     target (karmada.DefaultGOGC: why).
//   - Replicas are the fleet API's pods, each an etcd member
//     (definition.FleetReplicas); with more than one, PeerService names the
//     members and EtcdInitialCluster lists them.
//   - ControllerReplicas run each fleet controller (one leads, one waits)
//     and the webhook (stateless): 2 beside a replicated API, else 1.
func (Lifecycle) Values(def *definition.ClusterDefinition) map[string]any {
	replicas, controllers := def.FleetReplicas(), 1
	if replicas > 1 {
		controllers = 2
	}
	cpu := karmadaCPU
	if def.Cloud == definition.CloudKind {
		cpu = karmadaCPUKind()
	}
	return map[string]any{
		"EtcdClaim": def.Cloud == definition.CloudAWS, "CPU": cpu, "GOGC": karmada.DefaultGOGC,
		"Replicas": replicas, "PeerService": KarmadaPeerService, "EtcdInitialCluster": karmadaInitialCluster(replicas),
		"ControllerReplicas": controllers,
	}
}

func (Lifecycle) Check(ctx context.Context, a *addons.Applier, rendered []addons.Rendered) error {
	return checkFleetMembers(ctx, a, rendered)
}

// Seed creates the fleet's certificates once and renews them when due.
func (l Lifecycle) Seed(ctx context.Context, a *addons.Applier, rendered []addons.Rendered) error {
	if !slices.ContainsFunc(rendered, func(r addons.Rendered) bool { return r.Addon.Name == KarmadaAPIServerAddon }) {
		return nil
	}
	now := a.Now()
	secret, err := a.Client.CoreV1().Secrets(addons.Namespace).Get(ctx, KarmadaSecret, metav1.GetOptions{})
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
	return renewFleetPKI(ctx, a, secret, now)
}

// Finish replaces the fleet API's members (OnDelete) after every addon: the
// template may have changed with its addon or with a renewal of the
// certificates, and a roll an earlier apply left unfinished goes on.
func (Lifecycle) Finish(ctx context.Context, a *addons.Applier) ([]addons.Result, error) {
	rolled, err := rollFleetMembers(ctx, a)
	var results []addons.Result
	if len(rolled) > 0 {
		results = append(results, addons.Result{Addon: KarmadaAPIServerAddon, Action: "members replaced", Objects: len(rolled)})
	}
	if err != nil {
		return results, fmt.Errorf("addon %s: %w", KarmadaAPIServerAddon, err)
	}
	return results, nil
}
