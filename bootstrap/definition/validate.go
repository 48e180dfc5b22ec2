package definition

import (
	"fmt"
	"net"
	"net/netip"
	"regexp"
	"strconv"
	"strings"

	"github.com/blang/semver/v4"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/trellis-dev/trellis/config/manifests"
	"github.com/trellis-dev/trellis/internal/versions"
)

// Supported Kubernetes versions (versions.env): the minors the pinned kops
// manages, from the first patch of the oldest to the last of the newest.
var (
	MinKubernetesVersion = versions.MinKubernetes
	MaxKubernetesVersion = versions.MaxKubernetes
)

// CheckAddonRange reports the addons of d that do not support Kubernetes v,
// as the addon bundle's index (config/manifests) says.
func CheckAddonRange(d *ClusterDefinition, p *field.Path, v semver.Version) field.ErrorList {
	var errs field.ErrorList
	for i, a := range d.Addons {
		info, ok := manifests.Lookup(a.Name)
		if !ok {
			continue
		}
		if v.LT(info.MinKubernetes) || v.GT(info.MaxKubernetes) {
			errs = append(errs, field.Invalid(p.Index(i).Child("name"), a.Name, fmt.Sprintf("addon %s supports Kubernetes %d.%d to %d.%d, not %s",
				a.Name, info.MinKubernetes.Major, info.MinKubernetes.Minor, info.MaxKubernetes.Major, info.MaxKubernetes.Minor, v)))
		}
	}
	return errs
}

var (
	zoneRE   = regexp.MustCompile(`^([a-z]{2}(-gov)?-[a-z]+-\d)([a-z])$`)
	taintRE  = regexp.MustCompile(`^([A-Za-z0-9./_-]+)(=([A-Za-z0-9._-]*))?:(NoSchedule|PreferNoSchedule|NoExecute)$`)
	imageRE  = regexp.MustCompile(`^(ami-[0-9a-f]{8,17}|ssm:/.+|[0-9]{12}/.+|[a-z0-9-]+/.+)$`)
	regionRE = regexp.MustCompile(`^[a-z]{2}(-gov)?-[a-z]+-\d$`)
)

// Validate checks a defaulted definition and returns every problem with its
// field path.
func Validate(d *ClusterDefinition) field.ErrorList {
	var errs field.ErrorList
	if d.APIVersion != APIVersion {
		errs = append(errs, field.NotSupported(field.NewPath("apiVersion"), d.APIVersion, []string{APIVersion}))
	}
	if d.Kind != Kind {
		errs = append(errs, field.NotSupported(field.NewPath("kind"), d.Kind, []string{Kind}))
	}
	if d.Name == "" {
		errs = append(errs, field.Required(field.NewPath("name"), ""))
	} else {
		for _, m := range validation.IsDNS1123Label(d.Name) {
			errs = append(errs, field.Invalid(field.NewPath("name"), d.Name, m))
		}
	}
	switch d.Cloud {
	case CloudAWS:
		errs = append(errs, validateAWS(d)...)
	case CloudKind:
	default:
		errs = append(errs, field.NotSupported(field.NewPath("cloud"), d.Cloud, []string{string(CloudAWS), string(CloudKind)}))
	}
	verrs := validateVersion(field.NewPath("kubernetesVersion"), d.KubernetesVersion)
	errs = append(errs, verrs...)
	if v, err := ParseKubernetesVersion(d.KubernetesVersion); err == nil && len(verrs) == 0 {
		errs = append(errs, CheckAddonRange(d, field.NewPath("addons"), v)...)
	}
	errs = append(errs, validateNetwork(d)...)
	errs = append(errs, validateControlPlane(d)...)
	errs = append(errs, validateInstanceSettings(field.NewPath("instanceDefaults"), d.InstanceDefaults.InstanceMetadata, d.InstanceDefaults.RootVolume, d.volumeType(nil))...)
	errs = append(errs, validateInstanceSettings(field.NewPath("controlPlane"), d.ControlPlane.InstanceMetadata, d.ControlPlane.RootVolume, d.volumeType(d.ControlPlane.RootVolume))...)
	errs = append(errs, validateInstanceGroups(d)...)
	errs = append(errs, validateAddons(d)...)
	errs = append(errs, validateRuntime(d)...)
	errs = append(errs, validateQuota(d)...)
	return errs
}

// ParseKubernetesVersion parses "1.36.1" or "v1.36.1" as a full version.
func ParseKubernetesVersion(v string) (semver.Version, error) {
	return semver.Parse(strings.TrimPrefix(v, "v"))
}

func validateVersion(p *field.Path, v string) field.ErrorList {
	if v == "" {
		return field.ErrorList{field.Required(p, "a full version such as 1.36.1")}
	}
	sv, err := ParseKubernetesVersion(v)
	if err != nil {
		return field.ErrorList{field.Invalid(p, v, "not a full semantic version such as 1.36.1")}
	}
	if sv.LT(MinKubernetesVersion) || sv.GT(MaxKubernetesVersion) {
		return field.ErrorList{field.Invalid(p, v, fmt.Sprintf("unsupported: this Trellis manages Kubernetes %d.%d to %d.%d",
			MinKubernetesVersion.Major, MinKubernetesVersion.Minor, MaxKubernetesVersion.Major, MaxKubernetesVersion.Minor))}
	}
	return nil
}

func validateAWS(d *ClusterDefinition) field.ErrorList {
	var errs field.ErrorList
	if d.Region == "" {
		errs = append(errs, field.Required(field.NewPath("region"), ""))
	} else if !regionRE.MatchString(d.Region) {
		errs = append(errs, field.Invalid(field.NewPath("region"), d.Region, "not an AWS region such as us-east-1"))
	}
	if len(d.Zones) == 0 {
		errs = append(errs, field.Required(field.NewPath("zones"), "at least one zone"))
	}
	seen := map[string]bool{}
	for i, z := range d.Zones {
		p := field.NewPath("zones").Index(i)
		if seen[z] {
			errs = append(errs, field.Duplicate(p, z))
		}
		seen[z] = true
		m := zoneRE.FindStringSubmatch(z)
		if m == nil {
			errs = append(errs, field.Invalid(p, z, "not an availability zone such as us-east-1a"))
		} else if d.Region != "" && m[1] != d.Region {
			errs = append(errs, field.Invalid(p, z, fmt.Sprintf("zone is outside region %s", d.Region)))
		}
	}
	if d.DNSZone != "" {
		for _, m := range validation.IsDNS1123Subdomain(d.DNSZone) {
			errs = append(errs, field.Invalid(field.NewPath("dnsZone"), d.DNSZone, m))
		}
	}
	if d.ControlPlane.MachineType == "" {
		errs = append(errs, field.Required(field.NewPath("controlPlane", "machineType"), ""))
	}
	errs = append(errs, validateImage(field.NewPath("controlPlane", "image"), d.ControlPlane.Image)...)
	for i, ig := range d.InstanceGroups {
		p := field.NewPath("instanceGroups").Index(i)
		if ig.MachineType == "" {
			errs = append(errs, field.Required(p.Child("machineType"), ""))
		}
		errs = append(errs, validateImage(p.Child("image"), ig.Image)...)
	}
	return errs
}

func validateImage(p *field.Path, image string) field.ErrorList {
	if image == "" {
		return field.ErrorList{field.Required(p, "an AMI id, an ssm: parameter, or owner/name")}
	}
	if !imageRE.MatchString(image) {
		return field.ErrorList{field.Invalid(p, image, "not an AMI id (ami-...), an ssm: parameter, or owner/name")}
	}
	return nil
}

func parsePrefix(errs *field.ErrorList, p *field.Path, s string, required bool) (netip.Prefix, bool) {
	if s == "" {
		if required {
			*errs = append(*errs, field.Required(p, "a CIDR such as 10.0.0.0/16"))
		}
		return netip.Prefix{}, false
	}
	pfx, err := netip.ParsePrefix(s)
	if err != nil {
		*errs = append(*errs, field.Invalid(p, s, "not a CIDR such as 10.0.0.0/16"))
		return netip.Prefix{}, false
	}
	if pfx.Masked() != pfx {
		*errs = append(*errs, field.Invalid(p, s, fmt.Sprintf("host bits are set; did you mean %s?", pfx.Masked())))
		return netip.Prefix{}, false
	}
	return pfx, true
}

type namedPrefix struct {
	path *field.Path
	pfx  netip.Prefix
}

func validateNetwork(d *ClusterDefinition) field.ErrorList {
	var errs field.ErrorList
	np := field.NewPath("network")
	aws := d.Cloud == CloudAWS
	vpc, vpcOK := parsePrefix(&errs, np.Child("vpcCIDR"), d.Network.VPCCIDR, aws)
	pod, podOK := parsePrefix(&errs, np.Child("podCIDR"), d.Network.PodCIDR, true)
	svc, svcOK := parsePrefix(&errs, np.Child("serviceCIDR"), d.Network.ServiceCIDR, true)

	var ranges []namedPrefix
	if vpcOK {
		ranges = append(ranges, namedPrefix{np.Child("vpcCIDR"), vpc})
	}
	if podOK {
		ranges = append(ranges, namedPrefix{np.Child("podCIDR"), pod})
	}
	if svcOK {
		ranges = append(ranges, namedPrefix{np.Child("serviceCIDR"), svc})
	}
	errs = append(errs, overlaps(ranges)...)

	zones := map[string]bool{}
	for _, z := range d.Zones {
		zones[z] = true
	}
	var subnets []namedPrefix
	covered := map[string]bool{}
	for i, s := range d.Network.Subnets {
		p := np.Child("subnets").Index(i)
		if s.Zone == "" {
			errs = append(errs, field.Required(p.Child("zone"), ""))
		} else if !zones[s.Zone] {
			errs = append(errs, field.Invalid(p.Child("zone"), s.Zone, "zone is not one of the cluster's zones"))
		} else if covered[s.Zone] {
			errs = append(errs, field.Duplicate(p.Child("zone"), s.Zone))
		}
		covered[s.Zone] = true
		if s.Public == "" && s.Private == "" {
			errs = append(errs, field.Required(p, "a public or a private CIDR"))
		}
		for _, kind := range []struct{ name, cidr string }{{"public", s.Public}, {"private", s.Private}} {
			pfx, ok := parsePrefix(&errs, p.Child(kind.name), kind.cidr, false)
			if !ok {
				continue
			}
			if vpcOK && (!vpc.Contains(pfx.Addr()) || pfx.Bits() < vpc.Bits()) {
				errs = append(errs, field.Invalid(p.Child(kind.name), kind.cidr, fmt.Sprintf("subnet is outside the VPC %s", vpc)))
			}
			subnets = append(subnets, namedPrefix{p.Child(kind.name), pfx})
		}
	}
	errs = append(errs, overlaps(subnets)...)
	if aws {
		for i, z := range d.Zones {
			if !covered[z] {
				errs = append(errs, field.Required(field.NewPath("zones").Index(i), fmt.Sprintf("zone %s has no subnet in network.subnets", z)))
			}
		}
	}
	return errs
}

func overlaps(ranges []namedPrefix) field.ErrorList {
	var errs field.ErrorList
	for i := range ranges {
		for j := i + 1; j < len(ranges); j++ {
			if ranges[i].pfx.Overlaps(ranges[j].pfx) {
				errs = append(errs, field.Invalid(ranges[j].path, ranges[j].pfx.String(),
					fmt.Sprintf("overlaps %s (%s)", ranges[i].path, ranges[i].pfx)))
			}
		}
	}
	return errs
}

func validateZonesIn(p *field.Path, zones []string, d *ClusterDefinition) field.ErrorList {
	var errs field.ErrorList
	known := map[string]bool{}
	for _, z := range d.Zones {
		known[z] = true
	}
	seen := map[string]bool{}
	for i, z := range zones {
		if seen[z] {
			errs = append(errs, field.Duplicate(p.Index(i), z))
		}
		seen[z] = true
		if d.Cloud == CloudAWS && !known[z] {
			errs = append(errs, field.Invalid(p.Index(i), z, "zone is not one of the cluster's zones"))
		}
	}
	return errs
}

func validateControlPlane(d *ClusterDefinition) field.ErrorList {
	var errs field.ErrorList
	p := field.NewPath("controlPlane")
	cp := d.ControlPlane
	errs = append(errs, validateZonesIn(p.Child("zones"), cp.Zones, d)...)
	if n := len(cp.Zones); d.Cloud == CloudAWS && n%2 == 0 {
		errs = append(errs, field.Invalid(p.Child("zones"), n, "etcd needs an odd number of control-plane zones (1, 3 or 5)"))
	}
	if cp.APIServer.MaxRequestsInflight < 0 {
		errs = append(errs, field.Invalid(p.Child("apiServer", "maxRequestsInflight"), cp.APIServer.MaxRequestsInflight, "must not be negative"))
	}
	if cp.APIServer.MaxMutatingRequestsInflight < 0 {
		errs = append(errs, field.Invalid(p.Child("apiServer", "maxMutatingRequestsInflight"), cp.APIServer.MaxMutatingRequestsInflight, "must not be negative"))
	}
	for i, w := range cp.APIServer.WatchCacheSizes {
		res, size, ok := strings.Cut(w, "#")
		if n, err := strconv.Atoi(size); !ok || res == "" || err != nil || n < 0 {
			errs = append(errs, field.Invalid(p.Child("apiServer", "watchCacheSizes").Index(i), w, "must be resource[.group]#size, e.g. pods#5000"))
		}
	}
	for name, c := range map[string]ClientTuning{"controllerManager": cp.ControllerManager, "scheduler": cp.Scheduler} {
		if c.QPS < 0 {
			errs = append(errs, field.Invalid(p.Child(name, "qps"), c.QPS, "must not be negative"))
		}
		if c.Burst < c.QPS {
			errs = append(errs, field.Invalid(p.Child(name, "burst"), c.Burst, fmt.Sprintf("must be at least qps (%d)", c.QPS)))
		}
	}
	e := cp.Etcd
	if e.QuotaBackendBytes < 0 || e.QuotaBackendBytes > DefaultEtcdQuotaBackendBytes {
		errs = append(errs, field.Invalid(p.Child("etcd", "quotaBackendBytes"), e.QuotaBackendBytes, "must be between 0 and 8 GiB (8589934592)"))
	}
	switch e.AutoCompactionMode {
	case "periodic", "revision":
	default:
		errs = append(errs, field.NotSupported(p.Child("etcd", "autoCompactionMode"), e.AutoCompactionMode, []string{"periodic", "revision"}))
	}
	return errs
}

func validateInstanceGroups(d *ClusterDefinition) field.ErrorList {
	var errs field.ErrorList
	names := map[string]bool{}
	if d.Cloud == CloudAWS && len(d.InstanceGroups) == 0 {
		errs = append(errs, field.Required(field.NewPath("instanceGroups"), "at least one node group"))
	}
	for i, ig := range d.InstanceGroups {
		p := field.NewPath("instanceGroups").Index(i)
		if ig.Name == "" {
			errs = append(errs, field.Required(p.Child("name"), ""))
		} else {
			for _, m := range validation.IsDNS1123Label(ig.Name) {
				errs = append(errs, field.Invalid(p.Child("name"), ig.Name, m))
			}
			if names[ig.Name] {
				errs = append(errs, field.Duplicate(p.Child("name"), ig.Name))
			}
			if strings.HasPrefix(ig.Name, "control-plane-") {
				errs = append(errs, field.Invalid(p.Child("name"), ig.Name, "the control-plane- prefix is reserved for controlPlane groups"))
			}
		}
		names[ig.Name] = true
		if ig.Role != RoleNode {
			errs = append(errs, field.NotSupported(p.Child("role"), ig.Role, []string{string(RoleNode)}))
		}
		if len(ig.Zones) == 0 {
			errs = append(errs, field.Required(p.Child("zones"), "a group needs at least one zone"))
		}
		errs = append(errs, validateZonesIn(p.Child("zones"), ig.Zones, d)...)
		if ig.MinSize == nil {
			errs = append(errs, field.Required(p.Child("minSize"), ""))
		} else if *ig.MinSize < 0 {
			errs = append(errs, field.Invalid(p.Child("minSize"), *ig.MinSize, "must not be negative"))
		}
		if ig.MaxSize == nil {
			errs = append(errs, field.Required(p.Child("maxSize"), ""))
		} else if ig.MinSize != nil && *ig.MinSize > *ig.MaxSize {
			errs = append(errs, field.Invalid(p.Child("maxSize"), *ig.MaxSize, fmt.Sprintf("must be at least minSize (%d)", *ig.MinSize)))
		}
		for k, v := range ig.Labels {
			for _, m := range validation.IsQualifiedName(k) {
				errs = append(errs, field.Invalid(p.Child("labels").Key(k), k, m))
			}
			for _, m := range validation.IsValidLabelValue(v) {
				errs = append(errs, field.Invalid(p.Child("labels").Key(k), v, m))
			}
		}
		for j, t := range ig.Taints {
			if !taintRE.MatchString(t) {
				errs = append(errs, field.Invalid(p.Child("taints").Index(j), t, "must be key[=value]:NoSchedule|PreferNoSchedule|NoExecute"))
			}
		}
		errs = append(errs, validateIntOrPercent(p.Child("maxSurge"), ig.MaxSurge)...)
		errs = append(errs, validateIntOrPercent(p.Child("maxUnavailable"), ig.MaxUnavailable)...)
		if isZero(ig.MaxSurge) && isZero(ig.MaxUnavailable) {
			errs = append(errs, field.Invalid(p.Child("maxUnavailable"), ig.MaxUnavailable, "maxSurge and maxUnavailable cannot both be zero: the group could never roll"))
		}
		errs = append(errs, validateGroupInstances(d, p, &ig)...)
	}
	return errs
}

func isZero(s string) bool { return s == "0" || s == "0%" }

func validateIntOrPercent(p *field.Path, s string) field.ErrorList {
	v := intstr.Parse(s)
	if v.Type == intstr.Int {
		if v.IntVal < 0 {
			return field.ErrorList{field.Invalid(p, s, "must not be negative")}
		}
		return nil
	}
	n, err := strconv.Atoi(strings.TrimSuffix(s, "%"))
	if !strings.HasSuffix(s, "%") || err != nil || n < 0 || n > 100 {
		return field.ErrorList{field.Invalid(p, s, "must be an integer or a percentage such as 25%")}
	}
	return nil
}

func validateAddons(d *ClusterDefinition) field.ErrorList {
	var errs field.ErrorList
	seen := map[string]bool{}
	for i, a := range d.Addons {
		p := field.NewPath("addons").Index(i)
		info, ok := manifests.Lookup(a.Name)
		switch {
		case a.Name == "":
			errs = append(errs, field.Required(p.Child("name"), ""))
		case !ok:
			errs = append(errs, field.NotFound(p.Child("name"), a.Name))
		case seen[a.Name]:
			errs = append(errs, field.Duplicate(p.Child("name"), a.Name))
		case a.Version != "" && a.Version != info.Version:
			errs = append(errs, field.NotSupported(p.Child("version"), a.Version, []string{info.Version}))
		}
		if ok {
			errs = append(errs, validateAddonValues(d, p, a)...)
		}
		seen[a.Name] = true
	}
	return errs
}

func validateRuntime(d *ClusterDefinition) field.ErrorList {
	var errs field.ErrorList
	p := field.NewPath("runtime")
	for i, hp := range d.Runtime.ZooKeeper.Ensemble {
		host, port, err := net.SplitHostPort(hp)
		if err != nil || host == "" {
			errs = append(errs, field.Invalid(p.Child("zookeeper", "ensemble").Index(i), hp, "must be host:port"))
			continue
		}
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			errs = append(errs, field.Invalid(p.Child("zookeeper", "ensemble").Index(i), hp, "port must be 1-65535"))
		}
	}
	if r := d.Runtime.ZooKeeper.Root; !strings.HasPrefix(r, "/") || (len(r) > 1 && strings.HasSuffix(r, "/")) {
		errs = append(errs, field.Invalid(p.Child("zookeeper", "root"), r, "must be an absolute znode path such as /discovery"))
	}
	if td := d.Runtime.TrustDomain; td != "" {
		for _, m := range validation.IsDNS1123Subdomain(td) {
			errs = append(errs, field.Invalid(p.Child("trustDomain"), td, m))
		}
	}
	ls := d.Runtime.LogSink
	switch ls.Type {
	case "", "stdout":
	case "file":
		if ls.Path == "" {
			errs = append(errs, field.Required(p.Child("logSink", "path"), "a file sink needs a path"))
		}
	case "kafka":
		if len(ls.Brokers) == 0 {
			errs = append(errs, field.Required(p.Child("logSink", "brokers"), "a kafka sink needs brokers"))
		}
		if ls.Topic == "" {
			errs = append(errs, field.Required(p.Child("logSink", "topic"), "a kafka sink needs a topic template"))
		}
	default:
		errs = append(errs, field.NotSupported(p.Child("logSink", "type"), ls.Type, []string{"kafka", "file", "stdout"}))
	}
	return errs
}
