package statestore

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/kops/upup/pkg/fi"
)

// ClusterCA returns the certificates of a cluster's kubernetes-ca keyset in
// the state store, PEM, oldest first and the distrusted ones left out (as
// kops writes a kubeconfig's certificate-authority-data): what a client of
// the cluster's apiserver trusts, from the store the cluster was made
// from rather than from whatever kubeconfig is at hand.
func ClusterCA(ctx context.Context, url, cluster string) ([]byte, error) {
	cs, err := Open(ctx, url)
	if err != nil {
		return nil, err
	}
	c, err := cs.GetCluster(ctx, cluster)
	if apierrors.IsNotFound(err) || (err == nil && c == nil) {
		return nil, fmt.Errorf("state store %s has no cluster %s", url, cluster)
	}
	if err != nil {
		return nil, fmt.Errorf("failed to read cluster %s from state store %s: %w", cluster, url, err)
	}
	ks, err := cs.KeyStore(c)
	if err != nil {
		return nil, fmt.Errorf("failed to open the keystore of %s in %s: %w", cluster, url, err)
	}
	set, err := ks.FindKeyset(ctx, fi.CertificateIDCA)
	if err != nil {
		return nil, fmt.Errorf("failed to read the %s keyset of %s in %s: %w", fi.CertificateIDCA, cluster, url, err)
	}
	if set == nil {
		return nil, fmt.Errorf("state store %s has no %s keyset for %s: kops makes it on the first `cluster create --yes`", url, fi.CertificateIDCA, cluster)
	}
	pem, err := set.ToCertificateBytes()
	if err != nil {
		return nil, fmt.Errorf("the %s keyset of %s in %s: %w", fi.CertificateIDCA, cluster, url, err)
	}
	if len(pem) == 0 {
		return nil, fmt.Errorf("the %s keyset of %s in %s holds no trusted certificate", fi.CertificateIDCA, cluster, url)
	}
	return pem, nil
}
