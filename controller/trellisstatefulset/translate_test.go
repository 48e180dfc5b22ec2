package trellisstatefulset

import (
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/trellis-dev/trellis/api/v1alpha1"
	"github.com/trellis-dev/trellis/controller/inject"
	"github.com/trellis-dev/trellis/internal/testutil/gen"
	"github.com/trellis-dev/trellis/internal/testutil/golden"
)

func TestStatefulSetGolden(t *testing.T) {
	s := &v1alpha1.TrellisStatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "kv", Namespace: "default", UID: "uid-kv"}, Spec: v1alpha1.TrellisStatefulSetSpec{
		Replicas: new(int32(3)),
		Ports:    []v1alpha1.Port{{Name: "client", Port: 2379}},
		Template: v1alpha1.PodTemplate{Containers: []corev1.Container{gen.Container("kv")}},
		VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{
			ObjectMeta: metav1.ObjectMeta{Name: "data"},
			Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("5Gi")}},
			},
		}},
	}}
	objs, err := Translate(s, inject.DefaultProfile())
	if err != nil {
		t.Fatal(err)
	}
	golden.AssertObjects(t, filepath.Join("testdata", "statefulset.golden.yaml"), objs)
}
