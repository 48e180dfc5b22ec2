package bootstrap

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"k8s.io/client-go/tools/clientcmd"

	"k8s.io/kops/pkg/kubeconfig"
	"k8s.io/kops/upup/pkg/fi"
	"k8s.io/kops/upup/pkg/fi/cloudup"

	"github.com/trellis-dev/trellis/bootstrap/definition"
	"github.com/trellis-dev/trellis/bootstrap/render"
	"github.com/trellis-dev/trellis/bootstrap/statestore"
)

// ErrBadLifetime is returned for an admin certificate lifetime that is not
// positive.
var ErrBadLifetime = errors.New("the admin certificate's lifetime must be positive")

// KubeconfigOptions say where a cluster lives and what credential to issue.
type KubeconfigOptions struct {
	// StateStore is the kops state store URL.
	StateStore string
	// Admin is the lifetime of the admin client certificate.
	Admin time.Duration
	// Cloud overrides the cloud kops builds from the spec (it is asked for
	// the API load balancer's address).
	Cloud fi.Cloud
}

// Kubeconfig builds a kubeconfig context for a stored cluster, as `kops
// export kubecfg --admin` does, with kops's own builder: the cluster's CA
// certificates, the API server's address, and an admin client certificate
// (organization system:masters) valid for opts.Admin, signed by the
// cluster's kubernetes-ca from the state store. The CA's private key is
// read to sign and never leaves this call.
func Kubeconfig(ctx context.Context, def *definition.ClusterDefinition, opts KubeconfigOptions) (*kubeconfig.KubeconfigBuilder, error) {
	if opts.Admin <= 0 {
		return nil, fmt.Errorf("%w: %s", ErrBadLifetime, opts.Admin)
	}
	name := render.ClusterName(def)
	cs, err := statestore.Open(ctx, opts.StateStore)
	if err != nil {
		return nil, err
	}
	c, err := getCluster(ctx, cs, name)
	if err != nil {
		return nil, fmt.Errorf("%w (create it first: `trellis cluster create --yes`)", err)
	}
	ks, err := cs.KeyStore(c)
	if err != nil {
		return nil, fmt.Errorf("failed to open the keystore of %s: %w", name, err)
	}
	ss, err := cs.SecretStore(c)
	if err != nil {
		return nil, fmt.Errorf("failed to open the secret store of %s: %w", name, err)
	}
	cloud := opts.Cloud
	if cloud == nil && c.Spec.API.LoadBalancer != nil {
		if cloud, err = cloudup.BuildCloud(c); err != nil {
			return nil, fmt.Errorf("failed to build cloud for %s: %w", name, err)
		}
	}
	b, err := kubeconfig.BuildKubecfg(ctx, c, ks, ss, cloud, kubeconfig.CreateKubecfgOptions{Admin: opts.Admin}, opts.StateStore)
	if err != nil {
		return nil, fmt.Errorf("failed to build a kubeconfig for %s: %w", name, err)
	}
	return b, nil
}

// StoredClusterCA is the CA of the definition's cluster in the kops state
// store it was created in (an s3:// store read through the emulator when
// one is given), as `cluster create` wrote it.
func StoredClusterCA(ctx context.Context, def *definition.ClusterDefinition, store, emulator string) ([]byte, error) {
	if err := (Env{Emulator: emulator, Region: def.Region}).Setup(); err != nil {
		return nil, err
	}
	return statestore.ClusterCA(ctx, store, render.ClusterName(def))
}

// WriteKubeconfig writes b's context into the kubeconfig file path (empty:
// $KUBECONFIG's first file, else ~/.kube/config), makes it the current one,
// and tells w where it went and until when the admin certificate is valid.
// Nothing secret is written to w.
func WriteKubeconfig(b *kubeconfig.KubeconfigBuilder, path string, w io.Writer) error {
	po := clientcmd.NewDefaultPathOptions()
	if path != "" {
		po.LoadingRules.ExplicitPath = path
	}
	if err := b.WriteKubecfg(po); err != nil {
		return fmt.Errorf("failed to write the kubeconfig %s: %w", po.GetDefaultFilename(), err)
	}
	until := "?"
	if blk, _ := pem.Decode(b.ClientCert); blk != nil {
		if cert, err := x509.ParseCertificate(blk.Bytes); err == nil {
			until = fmt.Sprintf("%s, %s %s", cert.NotAfter.UTC().Format(time.RFC3339), cert.Subject.CommonName, strings.Join(cert.Subject.Organization, ","))
		}
	}
	fmt.Fprintf(w, "Wrote context %s to %s (server %s); admin certificate valid until %s.\nTry: kubectl --context %s get nodes\n",
		b.Context, po.GetDefaultFilename(), b.Server, until, b.Context)
	return nil
}
