package logshipper

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/trellis-dev/trellis/daemons/logshipper/sink"
)

func TestWorkload(t *testing.T) {
	owner := func(apiVersion, kind, name string, controller bool) metav1.OwnerReference {
		return metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: name, Controller: ptr.To(controller)}
	}
	hash := map[string]string{"pod-template-hash": "7d9f8c6b5", "app": "web"}
	for _, tc := range []struct {
		name   string
		labels map[string]string
		owners []metav1.OwnerReference
		want   *sink.Workload
	}{
		{"deployment via its replicaset", hash, []metav1.OwnerReference{owner("apps/v1", "ReplicaSet", "web-7d9f8c6b5", true)}, &sink.Workload{Kind: "Deployment", Name: "web"}},
		{"deployment with dashes in its name", hash, []metav1.OwnerReference{owner("apps/v1", "ReplicaSet", "shop-web-api-7d9f8c6b5", true)}, &sink.Workload{Kind: "Deployment", Name: "shop-web-api"}},
		{"bare replicaset (no pod-template-hash)", map[string]string{"app": "web"}, []metav1.OwnerReference{owner("apps/v1", "ReplicaSet", "web", true)}, &sink.Workload{Kind: "ReplicaSet", Name: "web"}},
		{"replicaset not named after the hash", hash, []metav1.OwnerReference{owner("apps/v1", "ReplicaSet", "web", true)}, &sink.Workload{Kind: "ReplicaSet", Name: "web"}},
		{"statefulset", map[string]string{"controller-revision-hash": "db-5f7c9"}, []metav1.OwnerReference{owner("apps/v1", "StatefulSet", "db", true)}, &sink.Workload{Kind: "StatefulSet", Name: "db"}},
		{"daemonset", nil, []metav1.OwnerReference{owner("apps/v1", "DaemonSet", "node-exporter", true)}, &sink.Workload{Kind: "DaemonSet", Name: "node-exporter"}},
		{"job", map[string]string{"job-name": "migrate"}, []metav1.OwnerReference{owner("batch/v1", "Job", "migrate", true)}, &sink.Workload{Kind: "Job", Name: "migrate"}},
		{"the controller among other owners", nil, []metav1.OwnerReference{owner("v1", "ConfigMap", "cfg", false), owner("apps/v1", "DaemonSet", "ds", true)}, &sink.Workload{Kind: "DaemonSet", Name: "ds"}},
		{"bare pod", nil, nil, nil},
		{"owned but not controlled", nil, []metav1.OwnerReference{owner("v1", "ConfigMap", "cfg", false)}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := workload(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Labels: tc.labels, OwnerReferences: tc.owners}})
			if (got == nil) != (tc.want == nil) || (got != nil && *got != *tc.want) {
				t.Errorf("workload = %+v, want %+v", got, tc.want)
			}
		})
	}
}
