package rollbench

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/kops/pkg/apis/kops"
	"k8s.io/kops/pkg/instancegroups"
	"k8s.io/kops/pkg/validation"
	"k8s.io/kops/upup/pkg/fi/cloudup/awsup"

	"github.com/trellis-dev/trellis/bootstrap/rollout"
	"github.com/trellis-dev/trellis/bootstrap/statestore"
)

// Clouds opens the cluster's AWS cloud as kops sees it and as the Trellis
// rollout engine drives it, both on the emulator the environment names.
func Clouds(ctx context.Context, store, region, name string) (awsup.AWSCloud, *rollout.AWSCloud, error) {
	cloud, err := awsup.NewAWSCloud(region, map[string]string{awsup.TagClusterName: name})
	if err != nil {
		return nil, nil, fmt.Errorf("failed to open kops's AWS cloud in %s: %w", region, err)
	}
	cs, err := statestore.Open(ctx, store)
	if err != nil {
		return nil, nil, fmt.Errorf("failed to open state store %s: %w", store, err)
	}
	return cloud, &rollout.AWSCloud{AWS: cloud, Cluster: name, Clientset: cs}, nil
}

// KopsRoll is one roll of a group with kops's own rolling update, as `kops
// rolling-update cluster --yes --instance-group <group>` does.
type KopsRoll struct {
	Store, Name, Group string
	Cloud              awsup.AWSCloud
	// Settings replace the group's rolling-update settings (nil: kops's
	// defaults).
	Settings *kops.RollingUpdate
	// Kube and Config reach the cluster whose nodes the instances are: kops
	// drains them and validates the node groups after each node. Nil Kube
	// rolls cloud-only (--cloudonly): the instances are not nodes.
	Kube   kubernetes.Interface
	Config *rest.Config
	// kops's waits: --node-interval, --post-drain-delay, the validation
	// tick and the pause between two successful validations, and how many.
	Interval, PostDrain, Tick, Success time.Duration
	Validations                        int
}

// Run rolls the group and returns how many instances kops saw to update.
func (r KopsRoll) Run(ctx context.Context) (int, error) {
	st, err := Load(ctx, r.Store, r.Name, r.Group, r.Settings)
	if err != nil {
		return 0, err
	}
	var nodes []corev1.Node
	list := &kops.InstanceGroupList{}
	if r.Kube != nil {
		nl, err := r.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return 0, fmt.Errorf("failed to list nodes: %w", err)
		}
		nodes, list = nl.Items, st.All
	} else {
		// Only the rolled group, as `--instance-group` gives kops.
		for _, ig := range st.Rolled {
			list.Items = append(list.Items, *ig)
		}
	}
	groups, err := r.Cloud.GetCloudGroups(st.Spec.Cluster, st.Rolled, false, nodes)
	if err != nil {
		return 0, fmt.Errorf("kops cloud groups: %w", err)
	}
	need := 0
	for _, g := range groups {
		need += len(g.NeedUpdate)
	}
	if need == 0 {
		return 0, fmt.Errorf("kops sees no instance of %s to update", r.Group)
	}
	ru := &instancegroups.RollingUpdateCluster{
		Clientset: st.Clientset, Cluster: st.Spec.Cluster, Cloud: r.Cloud, ClusterName: r.Name, CloudOnly: r.Kube == nil,
		MasterInterval: r.Interval, NodeInterval: r.Interval, BastionInterval: r.Interval, PostDrainDelay: r.PostDrain,
		FailOnDrainError: true, FailOnValidate: true, ValidationTimeout: 15 * time.Minute, DrainTimeout: 15 * time.Minute,
		ValidateTickDuration: r.Tick, ValidateSuccessDuration: r.Success, ValidateCount: r.Validations,
	}
	if r.Kube != nil {
		// Validation covers the node groups only: in the local AWS loop the
		// control-plane instances are not nodes (the kind control plane is).
		validator, err := validation.NewClusterValidator(st.Spec.Cluster, r.Cloud, st.All,
			func(ig *kops.InstanceGroup) bool { return ig.Spec.Role == kops.InstanceGroupRoleNode }, nil, r.Config, r.Kube)
		if err != nil {
			return 0, fmt.Errorf("failed to build kops's cluster validator: %w", err)
		}
		ru.K8sClient, ru.ClusterValidator = r.Kube, validator
	}
	ru.Options.InitDefaults()
	if err := ru.RollingUpdate(ctx, groups, list); err != nil {
		return 0, fmt.Errorf("kops rolling update: %w", err)
	}
	return need, nil
}
