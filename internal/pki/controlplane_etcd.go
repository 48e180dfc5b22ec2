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
	if len(files[EtcdCACert]) > 0 {
		ca, err := keptCA(files, EtcdCACert, EtcdCAKey, o)
		if err != nil {
			return false, err
		}
		return true, issueEtcdPeer(files, ca, o)
	}
	ca, err := newCA(o.Name+" etcd ca", o.Now, 10*o.TTL)
	if err != nil {
		return false, err
	}
	if err := putPair(files, "etcd-ca", ca); err != nil {
		return false, err
	}
	return true, issueEtcdPeer(files, ca, o)
}

// issueEtcdPeer issues the etcd members' peer certificate from etcd's CA.
func issueEtcdPeer(out map[string][]byte, ca *KeyPair, o ControlPlaneOptions) error {
	t := serving("etcd-peer", o.EtcdPeerNames)
	t.ExtKeyUsage = append(t.ExtKeyUsage, x509.ExtKeyUsageClientAuth)
	return issueLeaf(out, ca, "etcd-peer", t, o)
}
