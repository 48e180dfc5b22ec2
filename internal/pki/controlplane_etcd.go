package pki

import (
	"crypto/x509"
	"fmt"
)

// EnsureEtcdPeer adds the etcd CA and peer certificate of o.EtcdPeerNames
// to files when they lack them (a PKI made before its etcd had peers), or
// the peer certificate alone, from the CA files have, when only it is
// missing; it says whether it added anything. Complete files are left as
// they are.
func EnsureEtcdPeer(files map[string][]byte, o ControlPlaneOptions) (bool, error) {
	if len(o.EtcdPeerNames) == 0 || (len(files[EtcdCACert]) > 0 && len(files[EtcdPeerCert]) > 0 && len(files[EtcdPeerKey]) > 0) {
		return false, nil
	}
	if o.TTL <= 0 {
		return false, fmt.Errorf("control plane PKI %s: no certificate lifetime", o.Name)
	}
	return true, issueEtcdPeer(files, o)
}

// issueEtcdPeer issues the etcd members' peer certificate into files from
// the etcd CA they hold (kept: it must outlive the certificate), or from a
// new one it adds when they hold none.
func issueEtcdPeer(files map[string][]byte, o ControlPlaneOptions) error {
	var ca *KeyPair
	var err error
	if len(files[EtcdCACert]) > 0 {
		ca, err = keptCA(files, EtcdCACert, EtcdCAKey, o)
	} else if ca, err = newCA(o.Name+" etcd ca", o.Now, 10*o.TTL); err == nil {
		err = putPair(files, "etcd-ca", ca)
	}
	if err != nil {
		return err
	}
	t := serving("etcd-peer", o.EtcdPeerNames)
	t.ExtKeyUsage = append(t.ExtKeyUsage, x509.ExtKeyUsageClientAuth)
	return issueLeaf(files, ca, "etcd-peer", t, o)
}
