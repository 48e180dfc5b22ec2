package trelliscronjob

import (
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/trellis-dev/trellis/api/v1alpha1"
	"github.com/trellis-dev/trellis/controller/inject"
	"github.com/trellis-dev/trellis/internal/testutil/gen"
	"github.com/trellis-dev/trellis/internal/testutil/golden"
)

func TestCronJobGolden(t *testing.T) {
	cj := &v1alpha1.TrellisCronJob{ObjectMeta: metav1.ObjectMeta{Name: "nightly", Namespace: "default", UID: "uid-nightly"}, Spec: v1alpha1.TrellisCronJobSpec{
		Schedule: "0 3 * * *",
		Template: v1alpha1.PodTemplate{Containers: []corev1.Container{gen.Container("report")}},
	}}
	objs, err := Translate(cj, inject.DefaultProfile())
	if err != nil {
		t.Fatal(err)
	}
	golden.AssertObjects(t, filepath.Join("testdata", "cronjob.golden.yaml"), objs)
}
