package trellisjobset

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/trellis-dev/trellis/api/v1alpha1"
	"github.com/trellis-dev/trellis/controller/inject"
	"github.com/trellis-dev/trellis/internal/testutil/gen"
	"github.com/trellis-dev/trellis/internal/testutil/golden"
)

func jobSet(shards int32) *v1alpha1.TrellisJobSet {
	return &v1alpha1.TrellisJobSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: Kind},
		ObjectMeta: metav1.ObjectMeta{Name: "index", Namespace: "batch", UID: "uid-index"},
		Spec: v1alpha1.TrellisJobSetSpec{
			Shards:      shards,
			Parallelism: new(int32(2)),
			Template:    v1alpha1.PodTemplate{Containers: []corev1.Container{gen.Container("indexer")}},
			ShardConfig: map[string]string{"shard.yaml": "shard: {{.Index}}\nof: {{.Count}}\nname: {{.Name}}\n"},
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{
				ObjectMeta: metav1.ObjectMeta{Name: "scratch"},
				Spec: corev1.PersistentVolumeClaimSpec{
					AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Gi")}},
				},
			}},
		},
	}
}

func TestShardGolden(t *testing.T) {
	objs, err := Shard(jobSet(4), inject.DefaultProfile(), 2)
	if err != nil {
		t.Fatal(err)
	}
	golden.AssertObjects(t, filepath.Join("testdata", "shard-2-of-4.golden.yaml"), objs)
}

func TestShardConfigErrors(t *testing.T) {
	js := jobSet(2)
	js.Spec.ShardConfig = map[string]string{"bad.yaml": "{{.Nope}}"}
	if _, err := Shard(js, inject.DefaultProfile(), 0); !errors.Is(err, ErrInvalidShardConfig) {
		t.Fatalf("want ErrInvalidShardConfig, got %v", err)
	}
}

func TestNextShards(t *testing.T) {
	js := jobSet(5)
	cases := []struct {
		states []ShardState
		want   []int32
	}{
		{[]ShardState{Pending, Pending, Pending, Pending, Pending}, []int32{0, 1}},
		{[]ShardState{Running, Pending, Pending, Pending, Pending}, []int32{1}},
		{[]ShardState{Running, Running, Pending, Pending, Pending}, nil},
		{[]ShardState{Succeeded, Running, Pending, Pending, Pending}, []int32{2}},
		{[]ShardState{Succeeded, Failed, Succeeded, Pending, Pending}, []int32{3, 4}},
	}
	for _, tc := range cases {
		if diff := cmp.Diff(tc.want, NextShards(js, tc.states)); diff != "" {
			t.Errorf("NextShards(%v) (-want +got):\n%s", tc.states, diff)
		}
	}
	js.Spec.Parallelism = nil
	if got := NextShards(js, make([]ShardState, 5)); len(got) != 5 {
		t.Errorf("no parallelism limit: want all 5 shards, got %v", got)
	}
}
