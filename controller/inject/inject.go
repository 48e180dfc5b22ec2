package inject

import (
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/trellis-dev/trellis/api/v1alpha1"
	"github.com/trellis-dev/trellis/api/wellknown"
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
	return map[string]string{wellknown.LabelWorkload: name, wellknown.LabelKind: strings.ToLower(kind)}
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
	pt.Labels[wellknown.LabelService] = w.Service
	pt.Labels[wellknown.LabelManagedBy] = wellknown.ManagedBy
	for _, k := range []string{wellknown.LabelTeam, wellknown.LabelCostCenter} {
		if v, ok := w.ObjectLabels[k]; ok {
			pt.Labels[k] = v
		}
	}
	pt.Annotations = map[string]string{}
	for k, v := range t.Metadata.Annotations {
		pt.Annotations[k] = v
	}
	pt.Annotations[wellknown.AnnotationProfile] = p.Revision
	discovery := enabled(w.Runtime.Discovery) && len(w.Ports) > 0
	if discovery {
		pt.Annotations[wellknown.AnnotationDiscoveryService] = w.Service
		pt.Annotations[wellknown.AnnotationDiscoveryEnv] = p.Env
		pt.Annotations[wellknown.AnnotationDiscoveryPorts] = portsAnnotation(w.Ports)
		if w.Shard != nil {
			pt.Annotations[wellknown.AnnotationDiscoveryShard] = fmt.Sprint(*w.Shard)
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
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: wellknown.VolumeConfig, MountPath: wellknown.PathConfig, ReadOnly: true})
		if enabled(w.Runtime.Identity) {
			c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: wellknown.VolumeIdentity, MountPath: wellknown.PathIdentity, ReadOnly: true})
		}
		spec.Containers = append(spec.Containers, c)
	}

	// Config: the init container renders inline config (and profile
	// settings) from the ConfigMap into a shared in-memory volume.
	spec.Volumes = append(spec.Volumes, corev1.Volume{Name: wellknown.VolumeConfig, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}}})
	initMounts := []corev1.VolumeMount{{Name: wellknown.VolumeConfig, MountPath: wellknown.PathConfig}}
	if w.ConfigMap != "" {
		spec.Volumes = append(spec.Volumes, corev1.Volume{Name: wellknown.VolumeConfigSrc, VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: w.ConfigMap}}}})
		initMounts = append(initMounts, corev1.VolumeMount{Name: wellknown.VolumeConfigSrc, MountPath: wellknown.PathConfigSrc, ReadOnly: true})
	}
	spec.InitContainers = append(spec.InitContainers, sidecar(p, corev1.Container{
		Name:         wellknown.ContainerConfigInit,
		Image:        p.Images.ConfigInit,
		Args:         []string{"--src=" + wellknown.PathConfigSrc, "--dst=" + wellknown.PathConfig},
		Env:          identityEnv(p, w),
		VolumeMounts: initMounts,
	}, false))

	if enabled(w.Runtime.Identity) {
		spec.Volumes = append(spec.Volumes,
			corev1.Volume{Name: wellknown.VolumeIdentity, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}}},
			corev1.Volume{Name: wellknown.VolumeCertAgent, VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: p.CertAgentSocketDir, Type: new(corev1.HostPathDirectoryOrCreate)}}},
		)
		spec.InitContainers = append(spec.InitContainers, sidecar(p, corev1.Container{
			Name:  wellknown.ContainerCert,
			Image: p.Images.Cert,
			Args:  []string{"--agent-socket=" + wellknown.PathCertAgent + "/" + wellknown.CertAgentSocket, "--out=" + wellknown.PathIdentity},
			// The agent attests the pod from its cgroup: the sidecar needs no
			// identity env.
			VolumeMounts: []corev1.VolumeMount{
				{Name: wellknown.VolumeIdentity, MountPath: wellknown.PathIdentity},
				{Name: wellknown.VolumeCertAgent, MountPath: wellknown.PathCertAgent, ReadOnly: true},
			},
			// The pod starts only once it holds its certificate.
			StartupProbe: &corev1.Probe{
				ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"/trellis-cert", "check", "--dir=" + wellknown.PathIdentity}}},
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
		// Ready means discoverable: the registrar opens this gate once the
		// pod's member znode exists (docs/design/readiness-gate.md).
		spec.ReadinessGates = append(spec.ReadinessGates, corev1.PodReadinessGate{ConditionType: wellknown.ConditionRegistered})
		spec.InitContainers = append(spec.InitContainers, sidecar(p, corev1.Container{
			Name:  wellknown.ContainerTraffic,
			Image: p.Images.Traffic,
			Args:  []string{"--service=" + w.Service, "--env=" + p.Env, "--ports=" + portsAnnotation(w.Ports), "--drain=5s"},
			// Only the address is not known before the pod runs. Every env
			// entry is paid for in each pod, ReplicaSet and Deployment
			// write.
			Env: []corev1.EnvVar{{Name: wellknown.EnvPodIP, ValueFrom: fieldRef("status.podIP")}},
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
		{Name: wellknown.EnvService, Value: w.Service},
		{Name: wellknown.EnvEnvironment, Value: p.Env},
		{Name: wellknown.EnvCluster, Value: p.Cluster},
		{Name: wellknown.EnvPodName, ValueFrom: fieldRef("metadata.name")},
		{Name: wellknown.EnvPodNamespace, ValueFrom: fieldRef("metadata.namespace")},
		{Name: wellknown.EnvPodIP, ValueFrom: fieldRef("status.podIP")},
		{Name: wellknown.EnvNodeName, ValueFrom: fieldRef("spec.nodeName")},
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
