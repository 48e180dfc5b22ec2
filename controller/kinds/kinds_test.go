package kinds

import (
	"errors"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trellis-dev/trellis/api/v1alpha1"
	"github.com/trellis-dev/trellis/controller/inject"
	"github.com/trellis-dev/trellis/controller/internal/workload"
	"github.com/trellis-dev/trellis/internal/testutil/gen"
	"github.com/trellis-dev/trellis/internal/testutil/golden"
)

func assertGolden(t *testing.T, name string, objs []client.Object) {
	t.Helper()
	golden.AssertObjects(t, filepath.Join("testdata", name+".golden.yaml"), objs)
}

func meta(ns, name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: ns, UID: types.UID("uid-" + name)}
}

func TestCronJobGolden(t *testing.T) {
	cj := &v1alpha1.TrellisCronJob{ObjectMeta: meta("default", "nightly"), Spec: v1alpha1.TrellisCronJobSpec{
		Schedule: "0 3 * * *",
		Template: v1alpha1.PodTemplate{Containers: []corev1.Container{gen.Container("report")}},
	}}
	objs, err := TranslateCronJob(cj, inject.DefaultProfile())
	if err != nil {
		t.Fatal(err)
	}
	assertGolden(t, "cronjob", objs)
}

func TestDaemonGoldenAndNamespaces(t *testing.T) {
	d := &v1alpha1.TrellisDaemon{ObjectMeta: meta("trellis-system", "node-agent"), Spec: v1alpha1.TrellisDaemonSpec{
		Template: v1alpha1.PodTemplate{Containers: []corev1.Container{gen.Container("agent")}},
	}}
	objs, err := TranslateDaemon(DefaultDaemonNamespaces)(d, inject.DefaultProfile())
	if err != nil {
		t.Fatal(err)
	}
	assertGolden(t, "daemon", objs)
	d.Namespace = "team-a"
	if _, err := TranslateDaemon(DefaultDaemonNamespaces)(d, inject.DefaultProfile()); !errors.Is(err, workload.ErrInvalid) {
		t.Fatalf("daemon outside allowed namespaces: want ErrInvalid, got %v", err)
	}
}

func TestStatefulSetGolden(t *testing.T) {
	s := &v1alpha1.TrellisStatefulSet{ObjectMeta: meta("default", "kv"), Spec: v1alpha1.TrellisStatefulSetSpec{
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
	objs, err := TranslateStatefulSet(s, inject.DefaultProfile())
	if err != nil {
		t.Fatal(err)
	}
	assertGolden(t, "statefulset", objs)
}
