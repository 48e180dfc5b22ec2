package statestore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"k8s.io/kops/util/pkg/vfs"

	"github.com/trellis-dev/trellis/internal/pki"
)

// A cluster's pod-identity root CA lives in the state store
// (<state>/<cluster>/trellis/pki/): created once at bootstrap, read whenever
// a signing CA for the in-cluster issuer is minted (pki.IssuerState). The
// root key never enters the cluster; the issuer gets an intermediate.
const (
	rootCert = "root.pem"
	rootKey  = "root-key.pem"
)

// pkiDir is the cluster's PKI folder in the state store.
func pkiDir(stateStore, cluster string) (vfs.Path, error) {
	base, err := vfs.Context.BuildVfsPath(stateStore)
	if err != nil {
		return nil, fmt.Errorf("failed to open state store %s: %w", stateStore, err)
	}
	return base.Join(cluster, "trellis", "pki"), nil
}

// EnsureIdentityRoot returns the cluster's identity root CA, creating it in
// the state store when there is none. created reports whether it was made
// now.
func EnsureIdentityRoot(ctx context.Context, stateStore, cluster, trustDomain string) (root *pki.KeyPair, created bool, err error) {
	d, err := pkiDir(stateStore, cluster)
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
	root, err = pki.NewRoot(trustDomain, pki.RootTTL, time.Now())
	if err != nil {
		return nil, false, err
	}
	key, err := pki.EncodeKey(root.Key)
	if err != nil {
		return nil, false, err
	}
	// The key first: a root certificate without its key would be unusable.
	if err := d.Join(rootKey).WriteFile(ctx, bytes.NewReader(key), nil); err != nil {
		return nil, false, fmt.Errorf("failed to write %s: %w", d.Join(rootKey), err)
	}
	if err := d.Join(rootCert).WriteFile(ctx, bytes.NewReader(pki.EncodeCerts(root.Cert)), nil); err != nil {
		return nil, false, fmt.Errorf("failed to write %s: %w", d.Join(rootCert), err)
	}
	return root, true, nil
}

// IdentityRoot reads the cluster's identity root CA (os.ErrNotExist when
// there is none).
func IdentityRoot(ctx context.Context, stateStore, cluster string) (*pki.KeyPair, error) {
	d, err := pkiDir(stateStore, cluster)
	if err != nil {
		return nil, err
	}
	return readRoot(ctx, d)
}

func readRoot(ctx context.Context, d vfs.Path) (*pki.KeyPair, error) {
	certPEM, err := d.Join(rootCert).ReadFile(ctx)
	if err != nil {
		return nil, fmt.Errorf("read the identity root certificate %s: %w", d.Join(rootCert), err)
	}
	keyPEM, err := d.Join(rootKey).ReadFile(ctx)
	if err != nil {
		return nil, fmt.Errorf("read the identity root key %s: %w", d.Join(rootKey), err)
	}
	certs, err := pki.ParseCerts(certPEM)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", d.Join(rootCert), err)
	}
	key, err := pki.ParseKey(keyPEM)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", d.Join(rootKey), err)
	}
	return &pki.KeyPair{Cert: certs[0], Key: key}, nil
}
