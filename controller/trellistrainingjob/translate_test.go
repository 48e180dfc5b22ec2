package trellistrainingjob

import (
	"encoding/json"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/trellis-dev/trellis/api/v1alpha1"
	"github.com/trellis-dev/trellis/controller/inject"
	"github.com/trellis-dev/trellis/internal/testutil/gen"
	"github.com/trellis-dev/trellis/internal/testutil/golden"
)

func training(fw v1alpha1.Framework, specs ...v1alpha1.ReplicaSpec) *v1alpha1.TrellisTrainingJob {
	return &v1alpha1.TrellisTrainingJob{
		ObjectMeta: metav1.ObjectMeta{Name: "resnet", Namespace: "ml", UID: "uid-resnet"},
		Spec:       v1alpha1.TrellisTrainingJobSpec{Framework: fw, ReplicaSpecs: specs, Port: 2222},
	}
}

func replicas(role v1alpha1.ReplicaRole, n int32) v1alpha1.ReplicaSpec {
	return v1alpha1.ReplicaSpec{Role: role, Replicas: n, Template: v1alpha1.PodTemplate{Containers: []corev1.Container{gen.Container("trainer")}}}
}

func envOf(t *testing.T, o any) map[string]string {
	t.Helper()
	env := map[string]string{}
	for _, e := range o.(*corev1.Pod).Spec.Containers[0].Env {
		env[e.Name] = e.Value
	}
	return env
}

func TestTensorFlowConfig(t *testing.T) {
	tj := training(v1alpha1.FrameworkTensorFlow, replicas("Chief", 1), replicas("Worker", 2), replicas("PS", 1))
	objs, err := Translate(tj, inject.DefaultProfile())
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 1+4 {
		t.Fatalf("want a service and 4 pods, got %d objects", len(objs))
	}
	var cfg struct {
		Cluster map[string][]string `json:"cluster"`
		Task    struct {
			Type  string `json:"type"`
			Index int    `json:"index"`
		} `json:"task"`
	}
	// objs[1..]: chief-0, worker-0, worker-1, ps-0
	if err := json.Unmarshal([]byte(envOf(t, objs[3])["TF_CONFIG"]), &cfg); err != nil {
		t.Fatal(err)
	}
	if cfg.Task.Type != "worker" || cfg.Task.Index != 1 || len(cfg.Cluster["worker"]) != 2 || cfg.Cluster["chief"][0] != "resnet-chief-0.resnet.ml.svc:2222" {
		t.Errorf("TF_CONFIG of worker 1: %+v", cfg)
	}
	golden.AssertObjects(t, filepath.Join("testdata", "tensorflow.golden.yaml"), objs[:2])
}

func TestPyTorchRanks(t *testing.T) {
	tj := training(v1alpha1.FrameworkPyTorch, replicas("Worker", 3), replicas("Master", 1))
	objs, err := Translate(tj, inject.DefaultProfile())
	if err != nil {
		t.Fatal(err)
	}
	ranks := map[string]string{}
	for _, o := range objs[1:] {
		env := envOf(t, o)
		if env["WORLD_SIZE"] != "4" || env["MASTER_ADDR"] != "resnet-master-0.resnet.ml.svc" || env["MASTER_PORT"] != "2222" {
			t.Errorf("%s: env %v", o.GetName(), env)
		}
		ranks[o.GetName()] = env["RANK"]
	}
	want := map[string]string{"resnet-master-0": "0", "resnet-worker-0": "1", "resnet-worker-1": "2", "resnet-worker-2": "3"}
	for k, v := range want {
		if ranks[k] != v {
			t.Errorf("rank of %s = %q, want %s (all: %v)", k, ranks[k], v, ranks)
		}
	}
	pod := objs[1].(*corev1.Pod)
	if pod.Spec.Hostname != "resnet-master-0" || pod.Spec.Subdomain != "resnet" || pod.Spec.RestartPolicy != corev1.RestartPolicyOnFailure {
		t.Errorf("master pod identity: %s.%s restart %s", pod.Spec.Hostname, pod.Spec.Subdomain, pod.Spec.RestartPolicy)
	}
}
