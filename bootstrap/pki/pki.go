// Package pki keeps a cluster's pod-identity root CA in the kops state
// store (<state>/<cluster>/trellis/pki/): created once at bootstrap, read
// whenever a signing CA for the in-cluster issuer is minted. The root key
// never enters the cluster; the issuer gets an intermediate.
package pki

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"k8s.io/kops/util/pkg/vfs"

	"github.com/trellis-dev/trellis/daemons/certs/ca"
)

const (
	rootCert = "root.pem"
	rootKey  = "root-key.pem"
	// RootTTL is the lifetime of a new root.
	RootTTL = 10 * 365 * 24 * time.Hour
	// SignerTTL is the lifetime of a signing CA minted for the issuer.
	SignerTTL = 365 * 24 * time.Hour
)

// dir is the cluster's PKI folder in the state store.
func dir(stateStore, cluster string) (vfs.Path, error) {
	base, err := vfs.Context.BuildVfsPath(stateStore)
	if err != nil {
		return nil, fmt.Errorf("failed to open state store %s: %w", stateStore, err)
	}
	return base.Join(cluster, "trellis", "pki"), nil
}

// EnsureRoot returns the cluster's root CA, creating it in the state store
// when there is none. created reports whether it was made now.
func EnsureRoot(ctx context.Context, stateStore, cluster, trustDomain string) (root *ca.KeyPair, created bool, err error) {
	d, err := dir(stateStore, cluster)
	if err != nil {
		return nil, false, err
	}
	root, err = readRoot(ctx, d)
	if err == nil {
		return root, false, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return nil, false, err
	}
	root, err = ca.NewRoot(trustDomain, RootTTL, time.Now())
	if err != nil {
		return nil, false, err
	}
	key, err := ca.EncodeKey(root.Key)
	if err != nil {
		return nil, false, err
	}
	// The key first: a root certificate without its key would be unusable.
	if err := d.Join(rootKey).WriteFile(ctx, bytes.NewReader(key), nil); err != nil {
		return nil, false, fmt.Errorf("failed to write %s: %w", d.Join(rootKey), err)
	}
	if err := d.Join(rootCert).WriteFile(ctx, bytes.NewReader(ca.EncodeCerts(root.Cert)), nil); err != nil {
		return nil, false, fmt.Errorf("failed to write %s: %w", d.Join(rootCert), err)
	}
	return root, true, nil
}

// Root reads the cluster's root CA (os.ErrNotExist when there is none).
func Root(ctx context.Context, stateStore, cluster string) (*ca.KeyPair, error) {
	d, err := dir(stateStore, cluster)
	if err != nil {
		return nil, err
	}
	return readRoot(ctx, d)
}

func readRoot(ctx context.Context, d vfs.Path) (*ca.KeyPair, error) {
	certPEM, err := d.Join(rootCert).ReadFile(ctx)
	if err != nil {
		return nil, err
	}
	keyPEM, err := d.Join(rootKey).ReadFile(ctx)
	if err != nil {
		return nil, err
	}
	certs, err := ca.ParseCerts(certPEM)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", d.Join(rootCert), err)
	}
	key, err := ca.ParseKey(keyPEM)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", d.Join(rootKey), err)
	}
	return &ca.KeyPair{Cert: certs[0], Key: key}, nil
}

// IssuerState mints a signing CA under root for the in-cluster issuer: the
// content of its CA Secret.
func IssuerState(root *ca.KeyPair, trustDomain string) (*ca.State, error) {
	signer, err := ca.NewIntermediate(root, trustDomain, SignerTTL, time.Now())
	if err != nil {
		return nil, err
	}
	return ca.NewState(root, signer), nil
}
