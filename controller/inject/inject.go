package inject

import (
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/trellis-dev/trellis/api/v1alpha1"
)

// ErrResourcesRequired is wrapped when a container lacks resources that the
// profile's policy requires. It is terminal: retrying cannot fix the spec.
var ErrResourcesRequired = errors.New("resource requests and limits are required")

// Workload describes the object a pod belongs to.
type Workload struct {
	Kind      string
	Name      string
	Namespace string
	// Service is the discovery name.
	Service string
	// ObjectLabels are the CR's labels; cost labels are copied to pods.
	ObjectLabels map[string]string
	Ports        []v1alpha1.Port
	Runtime      v1alpha1.Runtime
	// ConfigMap holding inline config, if any.
	ConfigMap string
	// Shard is set for sharded workloads.
	Shard *int32
}

// SelectorLabels identify a workload's pods; they never change.
func SelectorLabels(kind, name string) map[string]string {
	return map[string]string{v1alpha1.LabelWorkload: name, v1alpha1.LabelKind: strings.ToLower(kind)}
}

func enabled(b *bool) bool { return b == nil || *b }

// PodTemplate builds the pod template for a workload from what the user
// wrote and the profile.
func PodTemplate(p *Profile, w Workload, t v1alpha1.PodTemplate) (corev1.PodTemplateSpec, error) {
	pt := corev1.PodTemplateSpec{}
	pt.Labels = map[string]string{}
	for k, v := range t.Metadata.Labels {
		pt.Labels[k] = v
	}
	for k, v := range SelectorLabels(w.Kind, w.Name) {
		pt.Labels[k] = v
	}
	pt.Labels[v1alpha1.LabelService] = w.Service
	pt.Labels[v1alpha1.LabelManagedBy] = v1alpha1.ManagedBy
	for _, k := range []string{v1alpha1.LabelTeam, v1alpha1.LabelCostCenter} {
		if v, ok := w.ObjectLabels[k]; ok {
			pt.Labels[k] = v
		}
	}
	pt.Annotations = map[string]string{}
	for k, v := range t.Metadata.Annotations {
		pt.Annotations[k] = v
	}
	pt.Annotations[v1alpha1.AnnotationProfile] = p.Revision
	discovery := enabled(w.Runtime.Discovery) && len(w.Ports) > 0
	if discovery {
		pt.Annotations[v1alpha1.AnnotationDiscoveryService] = w.Service
		pt.Annotations[v1alpha1.AnnotationDiscoveryEnv] = p.Env
		pt.Annotations[v1alpha1.AnnotationDiscoveryPorts] = portsAnnotation(w.Ports)
		if w.Shard != nil {
			pt.Annotations[v1alpha1.AnnotationDiscoveryShard] = fmt.Sprint(*w.Shard)
		}
	}

	spec := &pt.Spec
	spec.ServiceAccountName = t.ServiceAccountName
	spec.NodeSelector = t.NodeSelector
	spec.Tolerations = t.Tolerations
	spec.TerminationGracePeriodSeconds = t.TerminationGracePeriodSeconds
	spec.Volumes = append(spec.Volumes, t.Volumes...)
	spec.Containers = make([]corev1.Container, 0, len(t.Containers))
	for _, c := range t.Containers {
		c = *c.DeepCopy()
		if err := applyResourcePolicy(p, w, &c); err != nil {
			return pt, err
		}
		c.Env = append(identityEnv(p, w), c.Env...)
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: v1alpha1.VolumeConfig, MountPath: v1alpha1.PathConfig, ReadOnly: true})
		if enabled(w.Runtime.Identity) {
			c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: v1alpha1.VolumeIdentity, MountPath: v1alpha1.PathIdentity, ReadOnly: true})
		}
		spec.Containers = append(spec.Containers, c)
	}

	// Config: the init container renders inline config (and profile
	// settings) from the ConfigMap into a shared in-memory volume.
	spec.Volumes = append(spec.Volumes, corev1.Volume{Name: v1alpha1.VolumeConfig, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}}})
	initMounts := []corev1.VolumeMount{{Name: v1alpha1.VolumeConfig, MountPath: v1alpha1.PathConfig}}
	if w.ConfigMap != "" {
		spec.Volumes = append(spec.Volumes, corev1.Volume{Name: v1alpha1.VolumeConfigSrc, VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: w.ConfigMap}}}})
		initMounts = append(initMounts, corev1.VolumeMount{Name: v1alpha1.VolumeConfigSrc, MountPath: v1alpha1.PathConfigSrc, ReadOnly: true})
	}
	spec.InitContainers = append(spec.InitContainers, sidecar(p, corev1.Container{
		Name:         v1alpha1.ContainerConfigInit,
		Image:        p.Images.ConfigInit,
		Args:         []string{"--src=" + v1alpha1.PathConfigSrc, "--dst=" + v1alpha1.PathConfig},
		Env:          identityEnv(p, w),
		VolumeMounts: initMounts,
	}, false))

	if enabled(w.Runtime.Identity) {
		spec.Volumes = append(spec.Volumes,
			corev1.Volume{Name: v1alpha1.VolumeIdentity, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}}},
			corev1.Volume{Name: v1alpha1.VolumeCertAgent, VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: p.CertAgentSocketDir, Type: new(corev1.HostPathDirectoryOrCreate)}}},
		)
		spec.InitContainers = append(spec.InitContainers, sidecar(p, corev1.Container{
			Name:  v1alpha1.ContainerCert,
			Image: p.Images.Cert,
			Args:  []string{"--agent-socket=" + v1alpha1.PathCertAgent + "/" + v1alpha1.CertAgentSocket, "--out=" + v1alpha1.PathIdentity},
			// The agent attests the pod from its cgroup: the sidecar needs no
			// identity env.
			VolumeMounts: []corev1.VolumeMount{
				{Name: v1alpha1.VolumeIdentity, MountPath: v1alpha1.PathIdentity},
				{Name: v1alpha1.VolumeCertAgent, MountPath: v1alpha1.PathCertAgent, ReadOnly: true},
			},
			// The pod starts only once it holds its certificate.
			StartupProbe: &corev1.Probe{
				ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"/trellis-cert", "check", "--dir=" + v1alpha1.PathIdentity}}},
				// Every field set, as the apiserver would default it, so that
				// the live object compares equal to the desired one.
				PeriodSeconds:    1,
				TimeoutSeconds:   1,
				SuccessThreshold: 1,
				FailureThreshold: 60,
			},
		}, true))
	}
	if discovery {
		spec.InitContainers = append(spec.InitContainers, sidecar(p, corev1.Container{
			Name:  v1alpha1.ContainerTraffic,
			Image: p.Images.Traffic,
			Args:  []string{"--service=" + w.Service, "--env=" + p.Env, "--ports=" + portsAnnotation(w.Ports), "--drain=5s"},
			// Only the address is not known before the pod runs. Every env
			// entry is paid for in each pod, ReplicaSet and Deployment
			// write.
			Env: []corev1.EnvVar{{Name: v1alpha1.EnvPodIP, ValueFrom: fieldRef("status.podIP")}},
		}, true))
	}
	return pt, nil
}

// sidecar gives an injected container the profile's sidecar resources; a
// restartable init container is a native sidecar (it runs beside the app
// and does not hold a Job open).
func sidecar(p *Profile, c corev1.Container, restartable bool) corev1.Container {
	c.Resources = *p.Resources.Sidecar.DeepCopy()
	if restartable {
		c.RestartPolicy = new(corev1.ContainerRestartPolicyAlways)
	}
	return c
}

func applyResourcePolicy(p *Profile, w Workload, c *corev1.Container) error {
	var missing []string
	for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		if _, ok := c.Resources.Requests[r]; !ok {
			missing = append(missing, "requests."+string(r))
		}
		if _, ok := c.Resources.Limits[r]; !ok {
			missing = append(missing, "limits."+string(r))
		}
	}
	if len(missing) == 0 {
		return nil
	}
	if p.Resources.Policy == PolicyRequire {
		return fmt.Errorf("%s %s/%s: container %q lacks %s: %w", w.Kind, w.Namespace, w.Name, c.Name, strings.Join(missing, ", "), ErrResourcesRequired)
	}
	DefaultResources(p, c)
	return nil
}

// DefaultResources fills a container's missing requests and limits from the
// profile's defaults.
func DefaultResources(p *Profile, c *corev1.Container) {
	if c.Resources.Requests == nil {
		c.Resources.Requests = corev1.ResourceList{}
	}
	if c.Resources.Limits == nil {
		c.Resources.Limits = corev1.ResourceList{}
	}
	for r, q := range p.Resources.Default.Requests {
		if _, ok := c.Resources.Requests[r]; !ok {
			c.Resources.Requests[r] = q.DeepCopy()
		}
	}
	for r, q := range p.Resources.Default.Limits {
		if _, ok := c.Resources.Limits[r]; !ok {
			c.Resources.Limits[r] = q.DeepCopy()
		}
	}
}

func identityEnv(p *Profile, w Workload) []corev1.EnvVar {
	env := []corev1.EnvVar{
		{Name: v1alpha1.EnvService, Value: w.Service},
		{Name: v1alpha1.EnvEnvironment, Value: p.Env},
		{Name: v1alpha1.EnvCluster, Value: p.Cluster},
		{Name: v1alpha1.EnvPodName, ValueFrom: fieldRef("metadata.name")},
		{Name: v1alpha1.EnvPodNamespace, ValueFrom: fieldRef("metadata.namespace")},
		{Name: v1alpha1.EnvPodIP, ValueFrom: fieldRef("status.podIP")},
		{Name: v1alpha1.EnvNodeName, ValueFrom: fieldRef("spec.nodeName")},
	}
	return env
}

func fieldRef(path string) *corev1.EnvVarSource {
	return &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: path}}
}

// portsAnnotation lists name:port in declaration order; the first is the
// service's primary endpoint.
func portsAnnotation(ports []v1alpha1.Port) string {
	parts := make([]string, 0, len(ports))
	for _, p := range ports {
		parts = append(parts, fmt.Sprintf("%s:%d", p.Name, p.Port))
	}
	return strings.Join(parts, ",")
}

// ServicePorts are the Service ports of a workload's named ports (TCP unless
// said otherwise), each targeting the same container port.
func ServicePorts(ports []v1alpha1.Port) []corev1.ServicePort {
	out := make([]corev1.ServicePort, 0, len(ports))
	for _, port := range ports {
		proto := port.Protocol
		if proto == "" {
			proto = corev1.ProtocolTCP
		}
		out = append(out, corev1.ServicePort{Name: port.Name, Port: port.Port, Protocol: proto, TargetPort: intstr.FromInt32(port.Port)})
	}
	return out
}
