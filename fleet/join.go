package fleet

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/trellis-dev/trellis/bootstrap/definition"
	"github.com/trellis-dev/trellis/fleet/karmada"
	apply "github.com/trellis-dev/trellis/internal/kubeapply"
)

// On a member, the fleet's identity: Karmada's controllers reach the member
// with this service account's token (push mode takes bearer tokens only).
const (
	memberNamespace      = "karmada-cluster"
	memberServiceAccount = "trellis-fleet"
	memberClusterRole    = "trellis-fleet:karmada-controller-manager"
	// CloudLabel on a member names its cloud (aws, kind).
	CloudLabel = "fleet.trellis.dev/cloud"
)

// Member is a cluster to join: its definition and how to reach it.
type Member struct {
	Definition *definition.ClusterDefinition
	// Config reaches the member's apiserver with rights to create the
	// fleet's service account and role binding (an admin kubeconfig).
	Config *rest.Config
	// StateCA, when set, is the cluster's CA from its kops state store
	// (statestore.ClusterCA): the member's apiserver must present a
	// certificate it signed, and it is the CA the fleet trusts for the
	// member, whatever the kubeconfig says.
	StateCA []byte
	// StateStore names where StateCA came from, for errors.
	StateStore string
	// Endpoint is the member apiserver's URL as the fleet's controllers
	// reach it, when that is not Config's (a management cluster that is
	// also a member: https://kubernetes.default.svc).
	Endpoint string
}

// JoinOptions tune Join.
type JoinOptions struct {
	// Wait is how long to wait for Karmada to report the member Ready
	// (0: do not wait).
	Wait time.Duration
	Log  *slog.Logger
}

// Join registers a member with the fleet in push mode, as karmadactl join
// does: a service account on the member bound to full rights, its token and
// the member's CA in a Secret on the fleet, and the Cluster object, named
// by the definition and carrying its cloud, region and zones. Joining again
// refreshes the credentials and labels; it is safe to repeat. With a
// StateCA, a member whose apiserver does not present a certificate of it
// is refused before anything is written, on the member or the fleet.
func Join(ctx context.Context, fleet *rest.Config, m Member, o JoinOptions) error {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	def := m.Definition
	if errs := validation.IsDNS1123Label(def.Name); len(errs) > 0 || len(def.Name) > 48 {
		return fmt.Errorf("cluster name %q cannot name a fleet member: a DNS label of at most 48 characters", def.Name)
	}
	endpoint, err := url.Parse(m.Config.Host)
	if err != nil || endpoint.Scheme != "https" {
		return fmt.Errorf("member %s: its apiserver %q is not an https URL: Karmada reaches members over https", def.Name, m.Config.Host)
	}
	if m.Endpoint != "" {
		if u, err := url.Parse(m.Endpoint); err != nil || u.Scheme != "https" || u.Host == "" {
			return fmt.Errorf("member %s: endpoint %q is not an https URL: Karmada reaches members over https", def.Name, m.Endpoint)
		}
	}
	ca := m.StateCA
	if ca != nil {
		if err := verifyServing(ctx, endpoint, ca); err != nil {
			return fmt.Errorf("member %s: its apiserver %s does not present a certificate of the cluster's CA in state store %s (the kubeconfig reaches another cluster, or the state store is another's): %w",
				def.Name, m.Config.Host, m.StateStore, err)
		}
	} else if ca, err = caBundle(m.Config); err != nil {
		return fmt.Errorf("member %s: %w", def.Name, err)
	}
	mc, err := kubernetes.NewForConfig(m.Config)
	if err != nil {
		return fmt.Errorf("member %s: create a client for its apiserver %s: %w", def.Name, m.Config.Host, err)
	}
	ks, err := mc.CoreV1().Namespaces().Get(ctx, metav1.NamespaceSystem, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("member %s: failed to read its kube-system namespace (its id): %w", def.Name, err)
	}
	token, err := memberToken(ctx, mc, o.Log.With("member", def.Name))
	if err != nil {
		return fmt.Errorf("member %s: %w", def.Name, err)
	}
	a, err := apply.New(fleet, karmada.FieldManager)
	if err != nil {
		return err
	}
	secret := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Secret",
		"metadata": map[string]any{"name": def.Name, "namespace": karmada.ClusterNamespace,
			"labels": map[string]any{ManagedByLabel: ManagedBy}},
		"type": "Opaque",
		"data": map[string]any{"token": b64(token), "caBundle": b64(ca)},
	}}
	apiEndpoint := m.Config.Host
	if m.Endpoint != "" {
		apiEndpoint = m.Endpoint
	}
	cluster := clusterObject(def, apiEndpoint, string(ks.UID))
	if err := a.Apply(ctx, secret, cluster); err != nil {
		return fmt.Errorf("member %s: %w", def.Name, err)
	}
	o.Log.Info("member joined", "member", def.Name, "endpoint", apiEndpoint, "id", ks.UID)
	if o.Wait == 0 {
		return nil
	}
	return WaitReady(ctx, fleet, def.Name, o.Wait)
}

// clusterObject is the Karmada Cluster of a definition.
func clusterObject(def *definition.ClusterDefinition, endpoint, id string) *unstructured.Unstructured {
	labels := map[string]any{ManagedByLabel: ManagedBy, CloudLabel: string(def.Cloud)}
	keys := make([]string, 0, len(def.CloudLabels))
	for k := range def.CloudLabels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		// Cloud labels are AWS tags; those that are valid labels label the member.
		if len(validation.IsQualifiedName(k)) == 0 && len(validation.IsValidLabelValue(def.CloudLabels[k])) == 0 {
			labels[k] = def.CloudLabels[k]
		}
	}
	spec := map[string]any{
		"syncMode":    "Push",
		"apiEndpoint": endpoint,
		"id":          id,
		"provider":    string(def.Cloud),
		"secretRef":   map[string]any{"namespace": karmada.ClusterNamespace, "name": def.Name},
	}
	if def.Region != "" {
		spec["region"] = def.Region
	}
	if len(def.Zones) > 0 {
		zones := make([]any, len(def.Zones))
		for i, z := range def.Zones {
			zones[i] = z
		}
		spec["zones"] = zones
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "cluster.karmada.io/v1alpha1", "kind": "Cluster",
		"metadata": map[string]any{"name": def.Name, "labels": labels},
		"spec":     spec,
	}}
}

// memberToken ensures the fleet's service account on the member, bound to
// full rights, and returns its long-lived token (from a service-account
// token Secret, which the member's token controller fills in).
func memberToken(ctx context.Context, c kubernetes.Interface, log *slog.Logger) ([]byte, error) {
	if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: memberNamespace}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("failed to create namespace %s: %w", memberNamespace, err)
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: memberServiceAccount, Namespace: memberNamespace}}
	if _, err := c.CoreV1().ServiceAccounts(memberNamespace).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("failed to create service account %s/%s: %w", memberNamespace, memberServiceAccount, err)
	}
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: memberClusterRole},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"*"}},
			{NonResourceURLs: []string{"*"}, Verbs: []string{"get"}},
		},
	}
	if _, err := c.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("failed to create cluster role %s: %w", memberClusterRole, err)
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: memberClusterRole},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: memberClusterRole},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: memberServiceAccount, Namespace: memberNamespace}},
	}
	if _, err := c.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("failed to create cluster role binding %s: %w", memberClusterRole, err)
	}
	tokenSecret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: memberServiceAccount + "-token", Namespace: memberNamespace,
			Annotations: map[string]string{corev1.ServiceAccountNameKey: memberServiceAccount}},
		Type: corev1.SecretTypeServiceAccountToken,
	}
	if _, err := c.CoreV1().Secrets(memberNamespace).Create(ctx, tokenSecret, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("failed to create the token Secret: %w", err)
	}
	var token []byte
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		s, err := c.CoreV1().Secrets(memberNamespace).Get(ctx, tokenSecret.Name, metav1.GetOptions{})
		if err != nil {
			return false, fmt.Errorf("get the token Secret: %w", err)
		}
		token = s.Data[corev1.ServiceAccountTokenKey]
		return len(token) > 0, nil
	})
	if err != nil {
		return nil, fmt.Errorf("no token in %s/%s after 30s (does the member run kube-controller-manager's token controller?): %w", memberNamespace, tokenSecret.Name, err)
	}
	log.Debug("fleet service account ready", "namespace", memberNamespace, "name", memberServiceAccount)
	return token, nil
}

// verifyServing connects to the apiserver at endpoint and verifies its
// serving certificate against the CA bundle alone (no system roots).
func verifyServing(ctx context.Context, endpoint *url.URL, ca []byte) error {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return errors.New("the CA bundle holds no PEM certificate")
	}
	host := endpoint.Host
	if endpoint.Port() == "" {
		host = net.JoinHostPort(endpoint.Hostname(), "443")
	}
	d := tls.Dialer{Config: &tls.Config{RootCAs: pool, ServerName: endpoint.Hostname(), MinVersion: tls.VersionTLS12}}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	c, err := d.DialContext(ctx, "tcp", host)
	if err != nil {
		return fmt.Errorf("connect to %s over TLS: %w", host, err)
	}
	return c.Close()
}

// caBundle is the CA the member's apiserver certificate chains to.
func caBundle(cfg *rest.Config) ([]byte, error) {
	if len(cfg.CAData) > 0 {
		return cfg.CAData, nil
	}
	if cfg.CAFile != "" {
		b, err := os.ReadFile(cfg.CAFile)
		if err != nil {
			return nil, fmt.Errorf("failed to read the apiserver CA: %w", err)
		}
		return b, nil
	}
	return nil, errors.New("its kubeconfig names no certificate authority: Karmada would have to skip TLS verification")
}
