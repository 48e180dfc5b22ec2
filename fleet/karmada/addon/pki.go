package addon

import (
	"fmt"
	"maps"
	"strings"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/trellis-dev/trellis/addons"
	"github.com/trellis-dev/trellis/internal/pki"
)

// The fleet's control plane on a management cluster (addons
// karmada-apiserver and karmada): the Secret of its certificates and admin
// kubeconfigs, which the applier seeds once and never replaces, and the
// names its certificates carry.
const (
	KarmadaAPIServerAddon = "karmada-apiserver"
	KarmadaAddon          = "karmada"
	KarmadaSecret         = "karmada-pki"
	// KarmadaKubeconfig reaches the fleet's apiserver through its Service;
	// KarmadaLocalKubeconfig over the pod's loopback (the aggregated
	// apiserver beside it).
	KarmadaKubeconfig      = "kubeconfig"
	KarmadaLocalKubeconfig = "kubeconfig-local"
	// KarmadaService and KarmadaPort: the fleet's apiserver in the cluster.
	KarmadaService = "karmada-apiserver"
	KarmadaPort    = 5443
	// KarmadaPeerService is the headless Service of the fleet's etcd
	// members (pods karmada-apiserver-N), on KarmadaPeerPort.
	KarmadaPeerService = "karmada-apiserver-peers"
	KarmadaPeerPort    = 2380
	// karmadaAggregated is the Service of the aggregated apiserver in the
	// fleet's apiserver (karmada-system; an ExternalName to the pod's
	// loopback), the name its certificate is checked against.
	karmadaAggregated = "karmada-aggregated-apiserver.karmada-system.svc"
	// KarmadaAdmin is the admin client certificate's user.
	KarmadaAdmin = "trellis-fleet-admin"
	// karmadaCertTTL: the certificates live a year (the CA ten), and an
	// apply renews them in their last karmadaRenewBefore (a third, as
	// cert-manager's default), then restarts the fleet's workloads.
	karmadaCertTTL     = 365 * 24 * time.Hour
	karmadaRenewBefore = karmadaCertTTL / 3
	// KarmadaRenewedAnnotation on karmada-pki is when the applier last
	// renewed the certificates; on the fleet workloads' pod templates,
	// the renewal they were restarted for.
	KarmadaRenewedAnnotation = "fleet.trellis.dev/pki-renewed-at"
)

// KarmadaServer is the fleet apiserver's in-cluster URL.
func KarmadaServer() string {
	return "https://" + KarmadaService + "." + addons.Namespace + ".svc:5443"
}

// karmadaPKIOptions name the fleet control plane's certificates.
func karmadaPKIOptions(now time.Time) pki.ControlPlaneOptions {
	svc := KarmadaService + "." + addons.Namespace
	return pki.ControlPlaneOptions{
		Name:           "trellis fleet",
		APIServerNames: []string{KarmadaService, svc, svc + ".svc", svc + ".svc.cluster.local", "localhost", "127.0.0.1"},
		Serving: map[string][]string{
			"aggregated": {karmadaAggregated, "localhost", "127.0.0.1"},
			"webhook":    {"karmada-webhook." + addons.Namespace + ".svc", "karmada-webhook." + addons.Namespace + ".svc.cluster.local"},
		},
		EtcdPeerNames: []string{"*." + karmadaPeerDomain(), "*." + karmadaPeerDomain() + ".cluster.local"},
		AdminUser:     KarmadaAdmin,
		TTL:           karmadaCertTTL,
		Now:           now,
	}
}

// karmadaPeerDomain is the domain of the etcd members' names.
func karmadaPeerDomain() string { return KarmadaPeerService + "." + addons.Namespace + ".svc" }

// KarmadaPeerURL is etcd member i's peer URL.
func KarmadaPeerURL(i int) string {
	return fmt.Sprintf("https://%s-%d.%s:%d", KarmadaService, i, karmadaPeerDomain(), KarmadaPeerPort)
}

// karmadaInitialCluster is etcd's --initial-cluster for n members, named
// after their pods.
func karmadaInitialCluster(n int) string {
	members := make([]string, n)
	for i := range members {
		members[i] = fmt.Sprintf("%s-%d=%s", KarmadaService, i, KarmadaPeerURL(i))
	}
	return strings.Join(members, ",")
}

// karmadaPKI makes the Secret data of the fleet's control plane.
func karmadaPKI(now time.Time) (map[string][]byte, error) {
	files, err := pki.NewControlPlane(karmadaPKIOptions(now))
	if err != nil {
		return nil, err
	}
	return files, karmadaKubeconfigs(files)
}

// renewKarmadaPKI renews the Secret data's certificates (all but the CAs)
// when one of them expires within karmadaRenewBefore of now (renewed), and
// adds the etcd peer certificate to data made before the fleet's etcd had
// peers (added; nothing running uses it yet, so nothing restarts for it).
func renewKarmadaPKI(data map[string][]byte, now time.Time) (out map[string][]byte, renewed, added bool, err error) {
	o := karmadaPKIOptions(now)
	data = maps.Clone(data)
	if added, err = pki.EnsureEtcdPeer(data, o); err != nil {
		return nil, false, false, err
	}
	first, name, err := firstExpiry(data, pki.ControlPlaneLeaves(o))
	if err != nil {
		return nil, false, false, err
	}
	if now.Add(karmadaRenewBefore).Before(first) {
		return data, false, added, nil
	}
	files, err := pki.RenewControlPlane(data, o)
	if err != nil {
		return nil, false, false, fmt.Errorf("%s expires %s: %w", name, first.UTC().Format(time.RFC3339), err)
	}
	return files, true, added, karmadaKubeconfigs(files)
}

// firstExpiry is the earliest expiry among the named certificates.
func firstExpiry(data map[string][]byte, names []string) (time.Time, string, error) {
	var first time.Time
	var which string
	for _, name := range names {
		certs, err := pki.ParseCerts(data[name])
		if err != nil || len(certs) == 0 {
			return time.Time{}, "", fmt.Errorf("%s: no certificate: %v", name, err)
		}
		if which == "" || certs[0].NotAfter.Before(first) {
			first, which = certs[0].NotAfter, name
		}
	}
	return first, which, nil
}

// karmadaKubeconfigs adds the admin kubeconfigs to files.
func karmadaKubeconfigs(files map[string][]byte) error {
	for name, server := range map[string]string{KarmadaKubeconfig: KarmadaServer(), KarmadaLocalKubeconfig: "https://127.0.0.1:5443"} {
		cfg := clientcmdapi.NewConfig()
		cfg.Clusters["fleet"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: files[pki.CACert]}
		cfg.AuthInfos[KarmadaAdmin] = &clientcmdapi.AuthInfo{ClientCertificateData: files[pki.AdminCert], ClientKeyData: files[pki.AdminKey]}
		cfg.Contexts["fleet"] = &clientcmdapi.Context{Cluster: "fleet", AuthInfo: KarmadaAdmin}
		cfg.CurrentContext = "fleet"
		b, err := clientcmd.Write(*cfg)
		if err != nil {
			return fmt.Errorf("failed to encode kubeconfig %s: %w", name, err)
		}
		files[name] = b
	}
	return nil
}
