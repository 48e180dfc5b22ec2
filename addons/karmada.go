package addons

import (
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

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
	// karmadaAggregated is the Service of the aggregated apiserver in the
	// fleet's apiserver (karmada-system; an ExternalName to the pod's
	// loopback), the name its certificate is checked against.
	karmadaAggregated = "karmada-aggregated-apiserver.karmada-system.svc"
	// KarmadaAdmin is the admin client certificate's user.
	KarmadaAdmin = "trellis-fleet-admin"
	// karmadaCertTTL: the certificates are not rotated yet; a year.
	karmadaCertTTL = 365 * 24 * time.Hour
)

// KarmadaServer is the fleet apiserver's in-cluster URL.
func KarmadaServer() string {
	return "https://" + KarmadaService + "." + Namespace + ".svc:5443"
}

// karmadaPKI makes the Secret data of the fleet's control plane.
func karmadaPKI(now time.Time) (map[string][]byte, error) {
	svc := KarmadaService + "." + Namespace
	files, err := pki.NewControlPlane(pki.ControlPlaneOptions{
		Name:           "trellis fleet",
		APIServerNames: []string{KarmadaService, svc, svc + ".svc", svc + ".svc.cluster.local", "localhost", "127.0.0.1"},
		Serving: map[string][]string{
			"aggregated": {karmadaAggregated, "localhost", "127.0.0.1"},
			"webhook":    {"karmada-webhook." + Namespace + ".svc", "karmada-webhook." + Namespace + ".svc.cluster.local"},
		},
		AdminUser: KarmadaAdmin,
		TTL:       karmadaCertTTL,
		Now:       now,
	})
	if err != nil {
		return nil, err
	}
	for name, server := range map[string]string{KarmadaKubeconfig: KarmadaServer(), KarmadaLocalKubeconfig: "https://127.0.0.1:5443"} {
		cfg := clientcmdapi.NewConfig()
		cfg.Clusters["fleet"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: files[pki.CACert]}
		cfg.AuthInfos[KarmadaAdmin] = &clientcmdapi.AuthInfo{ClientCertificateData: files[pki.AdminCert], ClientKeyData: files[pki.AdminKey]}
		cfg.Contexts["fleet"] = &clientcmdapi.Context{Cluster: "fleet", AuthInfo: KarmadaAdmin}
		cfg.CurrentContext = "fleet"
		if files[name], err = clientcmd.Write(*cfg); err != nil {
			return nil, err
		}
	}
	return files, nil
}
