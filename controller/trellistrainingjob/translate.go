// Package trellistrainingjob reconciles distributed training jobs: a pod per
// replica with stable hostnames behind a headless Service, and the
// framework's cluster description in each pod's environment (TF_CONFIG for
// TensorFlow; MASTER_ADDR, MASTER_PORT, WORLD_SIZE and RANK for PyTorch).
package trellistrainingjob

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trellis-dev/trellis/api/v1alpha1"
	"github.com/trellis-dev/trellis/api/wellknown"
	"github.com/trellis-dev/trellis/controller/inject"
)

// Kind is the API kind this package reconciles.
const Kind = "TrellisTrainingJob"

// Labels on replica pods.
const (
	LabelRole  = "training.trellis.dev/role"
	LabelIndex = "training.trellis.dev/index"
)

// PodName is the name (and hostname) of one replica.
func PodName(tj *v1alpha1.TrellisTrainingJob, role v1alpha1.ReplicaRole, i int32) string {
	return fmt.Sprintf("%s-%s-%d", tj.Name, strings.ToLower(string(role)), i)
}

func port(tj *v1alpha1.TrellisTrainingJob) int32 {
	if tj.Spec.Port == 0 {
		return 2222
	}
	return tj.Spec.Port
}

// address is a replica's stable DNS name and port.
func address(tj *v1alpha1.TrellisTrainingJob, role v1alpha1.ReplicaRole, i int32) string {
	return fmt.Sprintf("%s.%s.%s.svc:%d", PodName(tj, role, i), tj.Name, tj.Namespace, port(tj))
}

// Translate returns the headless Service and every replica pod.
func Translate(tj *v1alpha1.TrellisTrainingJob, p *inject.Profile) ([]client.Object, error) {
	owner := []metav1.OwnerReference{*metav1.NewControllerRef(tj, v1alpha1.GroupVersion.WithKind(Kind))}
	labels := func(extra map[string]string) map[string]string {
		l := inject.SelectorLabels(Kind, tj.Name)
		l[wellknown.LabelService] = tj.Name
		l[wellknown.LabelManagedBy] = wellknown.ManagedBy
		for k, v := range extra {
			l[k] = v
		}
		return l
	}
	svc := &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Name: tj.Name, Namespace: tj.Namespace, Labels: labels(nil), OwnerReferences: owner},
		Spec: corev1.ServiceSpec{
			ClusterIP:                corev1.ClusterIPNone,
			Selector:                 inject.SelectorLabels(Kind, tj.Name),
			PublishNotReadyAddresses: true,
			Ports:                    []corev1.ServicePort{{Name: "training", Port: port(tj), TargetPort: intstr.FromInt32(port(tj)), Protocol: corev1.ProtocolTCP}},
		},
	}
	objs := []client.Object{svc}
	world := int32(0)
	for _, rs := range tj.Spec.ReplicaSpecs {
		world += rs.Replicas
	}
	rank := int32(1) // PyTorch: the master is rank 0, workers follow
	for _, rs := range sortedSpecs(tj) {
		for i := range rs.Replicas {
			var env []corev1.EnvVar
			switch tj.Spec.Framework {
			case v1alpha1.FrameworkTensorFlow:
				cfg, err := tfConfig(tj, rs.Role, i)
				if err != nil {
					return nil, err
				}
				env = []corev1.EnvVar{{Name: "TF_CONFIG", Value: cfg}}
			case v1alpha1.FrameworkPyTorch:
				r := int32(0)
				if rs.Role != "Master" {
					r = rank
					rank++
				}
				env = []corev1.EnvVar{
					{Name: "MASTER_ADDR", Value: fmt.Sprintf("%s.%s.%s.svc", PodName(tj, "Master", 0), tj.Name, tj.Namespace)},
					{Name: "MASTER_PORT", Value: strconv.Itoa(int(port(tj)))},
					{Name: "WORLD_SIZE", Value: strconv.Itoa(int(world))},
					{Name: "RANK", Value: strconv.Itoa(int(r))},
				}
			}
			tmpl := *rs.Template.DeepCopy()
			for c := range tmpl.Containers {
				tmpl.Containers[c].Env = append(tmpl.Containers[c].Env, env...)
			}
			pt, err := inject.PodTemplate(p, inject.Workload{
				Kind: Kind, Name: tj.Name, Namespace: tj.Namespace, Service: tj.Name,
				ObjectLabels: tj.Labels, Runtime: tj.Spec.Runtime,
			}, tmpl)
			if err != nil {
				return nil, err
			}
			name := PodName(tj, rs.Role, i)
			pod := &corev1.Pod{
				TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
				ObjectMeta: metav1.ObjectMeta{
					Name: name, Namespace: tj.Namespace, OwnerReferences: owner, Annotations: pt.Annotations,
					Labels: labels(mergeLabels(pt.Labels, map[string]string{LabelRole: strings.ToLower(string(rs.Role)), LabelIndex: strconv.Itoa(int(i))})),
				},
				Spec: pt.Spec,
			}
			pod.Spec.Hostname = name
			pod.Spec.Subdomain = tj.Name
			pod.Spec.RestartPolicy = corev1.RestartPolicyOnFailure
			objs = append(objs, pod)
		}
	}
	return objs, nil
}

func mergeLabels(a, b map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}

// sortedSpecs orders roles so that ranks are stable: Master, Chief, Worker, PS.
func sortedSpecs(tj *v1alpha1.TrellisTrainingJob) []v1alpha1.ReplicaSpec {
	order := map[v1alpha1.ReplicaRole]int{"Master": 0, "Chief": 1, "Worker": 2, "PS": 3}
	specs := append([]v1alpha1.ReplicaSpec(nil), tj.Spec.ReplicaSpecs...)
	sort.SliceStable(specs, func(i, j int) bool { return order[specs[i].Role] < order[specs[j].Role] })
	return specs
}

// tfConfig is TensorFlow's TF_CONFIG for one task.
func tfConfig(tj *v1alpha1.TrellisTrainingJob, role v1alpha1.ReplicaRole, index int32) (string, error) {
	cluster := map[string][]string{}
	for _, rs := range tj.Spec.ReplicaSpecs {
		key := strings.ToLower(string(rs.Role))
		for i := range rs.Replicas {
			cluster[key] = append(cluster[key], address(tj, rs.Role, i))
		}
	}
	b, err := json.Marshal(map[string]any{
		"cluster": cluster,
		"task":    map[string]any{"type": strings.ToLower(string(role)), "index": index},
	})
	if err != nil {
		return "", fmt.Errorf("failed to encode the TF_CONFIG of %s %d of TrellisTrainingJob %s/%s: %w", role, index, tj.Namespace, tj.Name, err)
	}
	return string(b), nil
}
