package trellisdaemon

import (
	"errors"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/trellis-dev/trellis/api/v1alpha1"
	"github.com/trellis-dev/trellis/controller/inject"
	"github.com/trellis-dev/trellis/controller/internal/workload"
	"github.com/trellis-dev/trellis/internal/testutil/gen"
	"github.com/trellis-dev/trellis/internal/testutil/golden"
)

func TestDaemonGoldenAndNamespaces(t *testing.T) {
	d := &v1alpha1.TrellisDaemon{ObjectMeta: metav1.ObjectMeta{Name: "node-agent", Namespace: "trellis-system", UID: "uid-node-agent"}, Spec: v1alpha1.TrellisDaemonSpec{
		Template: v1alpha1.PodTemplate{Containers: []corev1.Container{gen.Container("agent")}},
	}}
	objs, err := Translate(d, inject.DefaultProfile(), DefaultNamespaces)
	if err != nil {
		t.Fatal(err)
	}
	golden.AssertObjects(t, filepath.Join("testdata", "daemon.golden.yaml"), objs)
	d.Namespace = "team-a"
	if _, err := Translate(d, inject.DefaultProfile(), DefaultNamespaces); !errors.Is(err, workload.ErrInvalid) {
		t.Fatalf("daemon outside allowed namespaces: want ErrInvalid, got %v", err)
	}
}
