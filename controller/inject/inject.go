package inject

import (
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/trellis-dev/trellis/api/v1alpha1"
)

// Labels and annotations the runtime puts on pods. The ZooKeeper registrar
// reads the discovery annotations.
const (
	LabelWorkload     = "trellis.dev/workload"
	LabelKind         = "trellis.dev/kind"
	LabelService      = "trellis.dev/service"
	LabelManagedBy    = "app.kubernetes.io/managed-by"
	LabelTeam         = "trellis.dev/team"
	LabelCostCenter   = "trellis.dev/cost-center"
	AnnotationProfile = "trellis.dev/runtime-profile"

	AnnotationDiscoveryService = "discovery.trellis.dev/service"
	AnnotationDiscoveryEnv     = "discovery.trellis.dev/env"
	AnnotationDiscoveryPorts   = "discovery.trellis.dev/ports"
	AnnotationDiscoveryShard   = "discovery.trellis.dev/shard"

	ManagedBy = "trellis"
)

// Names and paths of what is injected.
const (
	ConfigInitName  = "trellis-config-init"
	TrafficName     = "trellis-traffic"
	CertName        = "trellis-cert"
	ConfigVolume    = "trellis-config"
	ConfigSrcVolume = "trellis-config-src"
	IdentityVolume  = "trellis-identity"
	AgentVolume     = "trellis-cert-agent"
	ConfigPath      = "/etc/trellis/config"
	IdentityPath    = "/var/run/trellis/identity"
	AgentPath       = "/run/trellis/cert-agent"
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
	return map[string]string{LabelWorkload: name, LabelKind: strings.ToLower(kind)}
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
	pt.Labels[LabelService] = w.Service
	pt.Labels[LabelManagedBy] = ManagedBy
	for _, k := range []string{LabelTeam, LabelCostCenter} {
		if v, ok := w.ObjectLabels[k]; ok {
			pt.Labels[k] = v
		}
	}
	pt.Annotations = map[string]string{}
	for k, v := range t.Metadata.Annotations {
		pt.Annotations[k] = v
	}
	pt.Annotations[AnnotationProfile] = p.Revision
	discovery := enabled(w.Runtime.Discovery) && len(w.Ports) > 0
	if discovery {
		pt.Annotations[AnnotationDiscoveryService] = w.Service
		pt.Annotations[AnnotationDiscoveryEnv] = p.Env
		pt.Annotations[AnnotationDiscoveryPorts] = portsAnnotation(w.Ports)
		if w.Shard != nil {
			pt.Annotations[AnnotationDiscoveryShard] = fmt.Sprint(*w.Shard)
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
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: ConfigVolume, MountPath: ConfigPath, ReadOnly: true})
		if enabled(w.Runtime.Identity) {
			c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: IdentityVolume, MountPath: IdentityPath, ReadOnly: true})
		}
		spec.Containers = append(spec.Containers, c)
	}

	// Config: the init container renders inline config (and profile
	// settings) from the ConfigMap into a shared in-memory volume.
	spec.Volumes = append(spec.Volumes, corev1.Volume{Name: ConfigVolume, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}}})
	initMounts := []corev1.VolumeMount{{Name: ConfigVolume, MountPath: ConfigPath}}
	if w.ConfigMap != "" {
		spec.Volumes = append(spec.Volumes, corev1.Volume{Name: ConfigSrcVolume, VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: w.ConfigMap}}}})
		initMounts = append(initMounts, corev1.VolumeMount{Name: ConfigSrcVolume, MountPath: "/etc/trellis/config-src", ReadOnly: true})
	}
	spec.InitContainers = append(spec.InitContainers, sidecar(p, corev1.Container{
		Name:         ConfigInitName,
		Image:        p.Images.ConfigInit,
		Args:         []string{"--src=/etc/trellis/config-src", "--dst=" + ConfigPath},
		Env:          identityEnv(p, w),
		VolumeMounts: initMounts,
	}, false))

	if enabled(w.Runtime.Identity) {
		spec.Volumes = append(spec.Volumes,
			corev1.Volume{Name: IdentityVolume, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}}},
			corev1.Volume{Name: AgentVolume, VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: p.CertAgentSocketDir, Type: new(corev1.HostPathDirectoryOrCreate)}}},
		)
		spec.InitContainers = append(spec.InitContainers, sidecar(p, corev1.Container{
			Name:  CertName,
			Image: p.Images.Cert,
			Args:  []string{"--agent-socket=" + AgentPath + "/agent.sock", "--out=" + IdentityPath},
			// The agent attests the pod from its cgroup: the sidecar needs no
			// identity env.
			VolumeMounts: []corev1.VolumeMount{
				{Name: IdentityVolume, MountPath: IdentityPath},
				{Name: AgentVolume, MountPath: AgentPath, ReadOnly: true},
			},
			// The pod starts only once it holds its certificate.
			StartupProbe: &corev1.Probe{
				ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"/trellis-cert", "check", "--dir=" + IdentityPath}}},
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
			Name:  TrafficName,
			Image: p.Images.Traffic,
			Args:  []string{"--service=" + w.Service, "--env=" + p.Env, "--ports=" + portsAnnotation(w.Ports), "--drain=5s"},
			// Only the address is not known before the pod runs. Every env
			// entry is paid for in each pod, ReplicaSet and Deployment
			// write.
			Env: []corev1.EnvVar{{Name: "TRELLIS_POD_IP", ValueFrom: fieldRef("status.podIP")}},
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
		{Name: "TRELLIS_SERVICE", Value: w.Service},
		{Name: "TRELLIS_ENV", Value: p.Env},
		{Name: "TRELLIS_CLUSTER", Value: p.Cluster},
		{Name: "TRELLIS_POD_NAME", ValueFrom: fieldRef("metadata.name")},
		{Name: "TRELLIS_POD_NAMESPACE", ValueFrom: fieldRef("metadata.namespace")},
		{Name: "TRELLIS_POD_IP", ValueFrom: fieldRef("status.podIP")},
		{Name: "TRELLIS_NODE_NAME", ValueFrom: fieldRef("spec.nodeName")},
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
