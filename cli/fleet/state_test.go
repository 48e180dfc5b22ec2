package fleet_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	kopspki "k8s.io/kops/pkg/pki"
	"k8s.io/kops/upup/pkg/fi"

	"github.com/trellis-dev/trellis/bootstrap/definition"
	"github.com/trellis-dev/trellis/bootstrap/render"
	"github.com/trellis-dev/trellis/bootstrap/statestore"
	"github.com/trellis-dev/trellis/fleet/karmada"
	"github.com/trellis-dev/trellis/internal/pki"
)

// A member joins with its identity from the kops state store it was
// created from: its apiserver must present a certificate of the cluster's
// kubernetes-ca there, and the fleet trusts that CA even when the
// kubeconfig names none. A state store that is another cluster's (another
// CA), or that lacks the cluster, stops the join before the fleet is
// written to.
func TestIntegrationJoinFromStateStore(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	k, member := startFleet(ctx, t, karmada.Options{})
	t.Setenv("KOPS_STATE_STORE", "")
	const def = "../../clusters/prod-us-east-1.yaml"
	fleetClient := kubernetes.NewForConfigOrDie(k.Config)
	secret := func() []byte {
		s, err := fleetClient.CoreV1().Secrets(karmada.ClusterNamespace).Get(ctx, "prod-us-east-1", metav1.GetOptions{})
		if err != nil {
			return nil
		}
		return s.Data["caBundle"]
	}

	// A kubeconfig that does not verify the apiserver: without the state
	// store the join refuses it, with it the state store's CA is trusted.
	insecure := filepath.Join(t.TempDir(), "insecure.kubeconfig")
	if err := os.WriteFile(insecure, fmt.Appendf(nil, `apiVersion: v1
kind: Config
clusters: [{name: m, cluster: {server: %q, insecure-skip-tls-verify: true}}]
users: [{name: admin, user: {token: %q}}]
contexts: [{name: m, context: {cluster: m, user: admin}}]
current-context: m
`, member.APIURL, member.Config.BearerToken), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := run(t, "fleet", "join", "-f", def, "--kubeconfig", insecure, "--wait", "0")
	if code == 0 || !strings.Contains(stderr, "names no certificate authority") {
		t.Fatalf("join with an unverified kubeconfig and no state store: exit %d: %s", code, stderr)
	}

	memberKey, err := os.ReadFile(filepath.Join(member.Dir, "ca.key"))
	if err != nil {
		t.Fatal(err)
	}
	own := stateStore(t, def, member.Config.CAData, memberKey)
	code, out, stderr := run(t, "fleet", "join", "-f", def, "--kubeconfig", insecure, "--state", own, "--wait", "90s")
	if code != 0 || !strings.Contains(out, "prod-us-east-1 joined the fleet") {
		t.Fatalf("join from the state store: exit %d\n%s%s", code, out, stderr)
	}
	if got := secret(); !bytes.Equal(got, member.Config.CAData) {
		t.Fatalf("the fleet trusts %q for the member, want the state store's CA", got)
	}

	// Another cluster's state store: a different CA.
	other, err := pki.NewRoot("other.example", pki.RootTTL, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	otherKey, err := pki.EncodeKey(other.Key)
	if err != nil {
		t.Fatal(err)
	}
	wrong := stateStore(t, def, pki.EncodeCerts(other.Cert), otherKey)
	code, _, stderr = run(t, "fleet", "join", "-f", def, "--kubeconfig", member.Kubeconfig, "--state", wrong, "--wait", "0")
	if code == 0 || !strings.Contains(stderr, "does not present a certificate of the cluster's CA in state store "+wrong) ||
		!strings.Contains(stderr, "certificate signed by unknown authority") {
		t.Fatalf("join against another cluster's state store: exit %d: %s", code, stderr)
	}
	if got := secret(); !bytes.Equal(got, member.Config.CAData) {
		t.Fatalf("a refused join changed the fleet's CA for the member to %q", got)
	}

	empty := "file://" + t.TempDir()
	code, _, stderr = run(t, "fleet", "join", "-f", def, "--kubeconfig", member.Kubeconfig, "--state", empty)
	if code == 0 || !strings.Contains(stderr, "state store "+empty+" has no cluster prod-us-east-1.") {
		t.Fatalf("join against a state store without the cluster: exit %d: %s", code, stderr)
	}
}

// stateStore writes a file:// kops state store holding the cluster spec
// the definition at path renders, and a kubernetes-ca keyset of the CA
// certificate and key (PEM), as kops keeps it.
func stateStore(t *testing.T, path string, caPEM, keyPEM []byte) string {
	t.Helper()
	ctx := context.Background()
	l, err := definition.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	spec, err := render.ToKops(l.ClusterDefinition)
	if err != nil {
		t.Fatal(err)
	}
	url := "file://" + t.TempDir()
	cs, err := statestore.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	base, err := cs.ConfigBaseFor(spec.Cluster)
	if err != nil {
		t.Fatal(err)
	}
	spec.Cluster.Spec.ConfigStore.Base = base.Path()
	c, err := cs.CreateCluster(ctx, spec.Cluster)
	if err != nil {
		t.Fatal(err)
	}
	ks, err := cs.KeyStore(c)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := kopspki.ParsePEMCertificate(caPEM)
	if err != nil {
		t.Fatal(err)
	}
	key, err := kopspki.ParsePEMPrivateKey(keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	id := cert.Certificate.SerialNumber.String()
	item := &fi.KeysetItem{Id: id, Certificate: cert, PrivateKey: key}
	if err := ks.StoreKeyset(ctx, fi.CertificateIDCA, &fi.Keyset{Items: map[string]*fi.KeysetItem{id: item}, Primary: item}); err != nil {
		t.Fatal(err)
	}
	return url
}
