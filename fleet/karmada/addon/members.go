package addon

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/trellis-dev/trellis/addons"
)

// karmadaEtcdVolume is the fleet etcd's volume claim template: member N's
// claim is <karmadaEtcdVolume>-karmada-apiserver-N.
const karmadaEtcdVolume = "etcd-data"

// checkFleetMembers refuses to apply a fleet API whose number of etcd
// members differs from the one that runs, or that ran on the volumes
// still there (a pruned addon leaves its claims): the StatefulSet would
// start members that are not in the cluster's membership, or next to it
// (new members on empty volumes form a second cluster beside a member
// that kept its data), and the quorum would be lost. Growing or shrinking
// an etcd cluster is a member add or remove at a time, which Trellis does
// not do. It runs before anything is written.
func checkFleetMembers(ctx context.Context, a *addons.Applier, rendered []addons.Rendered) error {
	for _, r := range rendered {
		if r.Addon.Name != KarmadaAPIServerAddon {
			continue
		}
		want, err := renderedMembers(r)
		if err != nil {
			return err
		}
		refuse := func(have int, where string) error {
			keep := fmt.Sprintf("set the addon's values.replicas to %d to keep it", have)
			if have < 1 {
				keep = "bring it back to a member count the addon takes (1, 3 or 5) first"
			}
			return fmt.Errorf("addon %s: the fleet's etcd has %d members (%s) and the definition asks for %d: changing an etcd's membership is not supported; %s",
				r.Addon.Name, have, where, want, keep)
		}
		live, err := a.Client.AppsV1().StatefulSets(addons.Namespace).Get(ctx, KarmadaService, metav1.GetOptions{})
		switch {
		case err == nil:
			if have := members(live); have != want {
				return refuse(have, "statefulset "+addons.Namespace+"/"+KarmadaService)
			}
			return nil
		case !apierrors.IsNotFound(err):
			return fmt.Errorf("failed to read statefulset %s: %w", KarmadaService, err)
		}
		ordinals, err := etcdClaims(ctx, a)
		if err != nil {
			return err
		}
		if len(ordinals) == 0 {
			return nil
		}
		for i, o := range ordinals {
			if o != i || len(ordinals) != want {
				return refuse(len(ordinals), fmt.Sprintf("the volume claims of members %v remain in %s: the data of an earlier plane", ordinals, addons.Namespace))
			}
		}
	}
	return nil
}

// renderedMembers is the rendered fleet API StatefulSet's replicas.
func renderedMembers(r addons.Rendered) (int, error) {
	sts, err := fleetStatefulSet(r)
	if err != nil {
		return 0, err
	}
	if sts.Spec.Replicas == nil {
		return 0, fmt.Errorf("addon %s: StatefulSet %s renders no replicas", r.Addon.Name, KarmadaService)
	}
	return int(*sts.Spec.Replicas), nil
}

// fleetStatefulSet is the fleet API's StatefulSet as the addon r renders
// it.
func fleetStatefulSet(r addons.Rendered) (*appsv1.StatefulSet, error) {
	for _, o := range r.Objects {
		if o.GetKind() != "StatefulSet" || o.GetName() != KarmadaService {
			continue
		}
		var sts appsv1.StatefulSet
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &sts); err != nil {
			return nil, fmt.Errorf("addon %s: StatefulSet %s: %w", r.Addon.Name, KarmadaService, err)
		}
		return &sts, nil
	}
	return nil, fmt.Errorf("addon %s renders no StatefulSet %s", r.Addon.Name, KarmadaService)
}

// members is a StatefulSet's replicas (1 when unset, as the API defaults).
func members(s *appsv1.StatefulSet) int {
	if s.Spec.Replicas == nil {
		return 1
	}
	return int(*s.Spec.Replicas)
}

// etcdClaims are the ordinals of the fleet etcd's volume claims, sorted.
func etcdClaims(ctx context.Context, a *addons.Applier) ([]int, error) {
	claims, err := a.Client.CoreV1().PersistentVolumeClaims(addons.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("failed to list volume claims: %w", err)
	}
	prefix := karmadaEtcdVolume + "-" + KarmadaService + "-"
	var out []int
	for _, c := range claims.Items {
		if n, ok := ordinal(c.Name, prefix); ok {
			out = append(out, n)
		}
	}
	sort.Ints(out)
	return out, nil
}

// ordinal is the StatefulSet ordinal of name, the object of a member
// whose names start with prefix (a pod, a volume claim).
func ordinal(name, prefix string) (int, bool) {
	rest, ok := strings.CutPrefix(name, prefix)
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(rest)
	return n, err == nil
}

// checkFleetQuorum refuses to change the pod template of a fleet API
// StatefulSet the controller rolls itself (RollingUpdate: one made before
// the applier replaced the members) while not all of its members are
// ready: the StatefulSet controller restarts the highest outdated member
// whatever the state of the others, so with one member already down the
// next restart would take the quorum. An OnDelete StatefulSet restarts
// nothing on its own (rollFleetMembers replaces its members), and one
// member has no quorum to keep.
func checkFleetQuorum(ctx context.Context, a *addons.Applier, why string) error {
	s, err := a.Client.AppsV1().StatefulSets(addons.Namespace).Get(ctx, KarmadaService, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("failed to read statefulset %s: %w", KarmadaService, err)
	}
	if s.Spec.UpdateStrategy.Type == appsv1.OnDeleteStatefulSetStrategyType {
		return nil
	}
	if n := members(s); n > 1 && (s.Status.ObservedGeneration < s.Generation || int(s.Status.ReadyReplicas) < n) {
		return fmt.Errorf("%s: the fleet's etcd has %d of %d members ready: restarting one now could lose its quorum; bring the members back first", why, s.Status.ReadyReplicas, n)
	}
	return nil
}
