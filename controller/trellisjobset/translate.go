// Package trellisjobset reconciles TrellisJobSets: one Job per shard, each
// with its shard index and count in the environment, its own ConfigMap
// rendered from the shard-config templates and its own volume claims.
package trellisjobset

import (
	"bytes"
	"fmt"
	"sort"
	"strconv"
	"text/template"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trellis-dev/trellis/api/v1alpha1"
	"github.com/trellis-dev/trellis/api/wellknown"
	"github.com/trellis-dev/trellis/controller/inject"
)

// Kind is the API kind this package reconciles.
const Kind = "TrellisJobSet"

// JobName is the name of a shard's Job.
func JobName(js *v1alpha1.TrellisJobSet, shard int32) string {
	return fmt.Sprintf("%s-%d", js.Name, shard)
}

// ShardData is what shard-config templates see.
type ShardData struct {
	Name  string
	Index int32
	Count int32
}

// Shard returns the objects of one shard: its ConfigMap (if the JobSet has
// shard config), its PersistentVolumeClaims, and its Job, in creation order.
func Shard(js *v1alpha1.TrellisJobSet, p *inject.Profile, shard int32) ([]client.Object, error) {
	owner := []metav1.OwnerReference{*metav1.NewControllerRef(js, v1alpha1.GroupVersion.WithKind(Kind))}
	meta := func(name string) metav1.ObjectMeta {
		labels := inject.SelectorLabels(Kind, js.Name)
		labels[wellknown.LabelService] = js.Name
		labels[wellknown.LabelManagedBy] = wellknown.ManagedBy
		labels[wellknown.LabelShard] = strconv.Itoa(int(shard))
		return metav1.ObjectMeta{Name: name, Namespace: js.Namespace, Labels: labels, OwnerReferences: owner}
	}
	var objs []client.Object
	tmpl := *js.Spec.Template.DeepCopy()

	if len(js.Spec.ShardConfig) > 0 {
		cm := &corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"}, ObjectMeta: meta(fmt.Sprintf("%s-shard-%d", js.Name, shard)), Data: map[string]string{}}
		keys := make([]string, 0, len(js.Spec.ShardConfig))
		for k := range js.Spec.ShardConfig {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			t, err := template.New(k).Option("missingkey=error").Parse(js.Spec.ShardConfig[k])
			if err != nil {
				return nil, fmt.Errorf("%s %s/%s: shardConfig[%s]: %w", Kind, js.Namespace, js.Name, k, errInvalid(err))
			}
			var b bytes.Buffer
			if err := t.Execute(&b, ShardData{Name: js.Name, Index: shard, Count: js.Spec.Shards}); err != nil {
				return nil, fmt.Errorf("%s %s/%s: shardConfig[%s]: %w", Kind, js.Namespace, js.Name, k, errInvalid(err))
			}
			cm.Data[k] = b.String()
		}
		objs = append(objs, cm)
		tmpl.Volumes = append(tmpl.Volumes, corev1.Volume{Name: wellknown.VolumeShardConfig, VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: cm.Name}}}})
		for i := range tmpl.Containers {
			tmpl.Containers[i].VolumeMounts = append(tmpl.Containers[i].VolumeMounts, corev1.VolumeMount{Name: wellknown.VolumeShardConfig, MountPath: wellknown.PathShard, ReadOnly: true})
		}
	}
	for _, vct := range js.Spec.VolumeClaimTemplates {
		pvc := &corev1.PersistentVolumeClaim{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolumeClaim"},
			ObjectMeta: meta(fmt.Sprintf("%s-%s-%d", vct.Name, js.Name, shard)),
			Spec:       *vct.Spec.DeepCopy(),
		}
		objs = append(objs, pvc)
		tmpl.Volumes = append(tmpl.Volumes, corev1.Volume{Name: vct.Name, VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: pvc.Name}}})
	}
	for i := range tmpl.Containers {
		tmpl.Containers[i].Env = append(tmpl.Containers[i].Env,
			corev1.EnvVar{Name: wellknown.EnvShardIndex, Value: strconv.Itoa(int(shard))},
			corev1.EnvVar{Name: wellknown.EnvShardCount, Value: strconv.Itoa(int(js.Spec.Shards))},
		)
	}
	pt, err := inject.PodTemplate(p, inject.Workload{
		Kind: Kind, Name: js.Name, Namespace: js.Namespace, Service: js.Name,
		ObjectLabels: js.Labels, Runtime: js.Spec.Runtime, Shard: &shard,
	}, tmpl)
	if err != nil {
		return nil, err
	}
	pt.Labels[wellknown.LabelShard] = strconv.Itoa(int(shard))
	pt.Spec.RestartPolicy = corev1.RestartPolicyNever
	backoff := int32(3)
	if js.Spec.BackoffLimit != nil {
		backoff = *js.Spec.BackoffLimit
	}
	ttl := js.Spec.TTLSecondsAfterFinished
	if ttl == nil && p.JobTTLSeconds > 0 {
		ttl = &p.JobTTLSeconds
	}
	job := &batchv1.Job{
		TypeMeta:   metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
		ObjectMeta: meta(JobName(js, shard)),
		Spec: batchv1.JobSpec{
			BackoffLimit:            &backoff,
			Completions:             new(int32(1)),
			Parallelism:             new(int32(1)),
			TTLSecondsAfterFinished: ttl,
			Template:                pt,
		},
	}
	return append(objs, job), nil
}

// ShardState is a shard Job's state.
type ShardState int

const (
	Pending ShardState = iota // no Job yet
	Running
	Succeeded
	Failed
)

// JobState reads a Job's state from its conditions.
func JobState(j *batchv1.Job) ShardState {
	for _, c := range j.Status.Conditions {
		if c.Status != corev1.ConditionTrue {
			continue
		}
		switch c.Type {
		case batchv1.JobComplete:
			return Succeeded
		case batchv1.JobFailed:
			return Failed
		}
	}
	return Running
}

// NextShards returns which pending shards to start now: in index order, as
// many as keep the running count within parallelism (default: all).
func NextShards(js *v1alpha1.TrellisJobSet, states []ShardState) []int32 {
	limit := js.Spec.Shards
	if js.Spec.Parallelism != nil {
		limit = *js.Spec.Parallelism
	}
	running := int32(0)
	for _, s := range states {
		if s == Running {
			running++
		}
	}
	var next []int32
	for i, s := range states {
		if running >= limit {
			break
		}
		if s == Pending {
			next = append(next, int32(i))
			running++
		}
	}
	return next
}

// ErrInvalidShardConfig is wrapped when a shard-config template cannot render.
var ErrInvalidShardConfig = fmt.Errorf("invalid shard config template")

func errInvalid(err error) error { return fmt.Errorf("%w: %w", ErrInvalidShardConfig, err) }
