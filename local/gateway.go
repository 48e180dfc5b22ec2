package local

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/kind/pkg/cluster/nodeutils"

	"github.com/trellis-dev/trellis/addons"
	"github.com/trellis-dev/trellis/daemons/certs/issuer"
	"github.com/trellis-dev/trellis/gateway/client"
	"github.com/trellis-dev/trellis/internal/fsync"
)

const (
	// GatewayNodePort is the port on every kind node (reachable from the
	// host on the node's Docker address) that forwards to trellis-gateway.
	GatewayNodePort = 30443
	// GatewayNodePortService is the local-only Service behind it.
	GatewayNodePortService = "trellis-gateway-local"
	// GatewayServerName is the DNS name in the gateway's pod identity,
	// checked instead of the node address the host dials.
	GatewayServerName = "trellis-gateway.trellis-system.svc.cluster.local"
	// GatewayAudience is the audience the gateway accepts tokens for.
	GatewayAudience = "trellis-gateway"
	// DevIdentity is the ServiceAccount, in SampleNamespace, whose token
	// the local context file carries.
	DevIdentity = "trellis-dev"
	// SampleNamespace is config/samples' namespace.
	SampleNamespace = "default"
	// DevTokenTTL is how long the dev token lives; `trellis local up`
	// again renews it.
	DevTokenTTL  = 12 * time.Hour
	fieldManager = "trellis-local"
)

// workloadResources are the six Trellis workload kinds' resources.
var workloadResources = []string{"trellisservices", "trellisjobsets", "trelliscronjobs", "trellisdaemons", "trellistrainingjobs", "trellisstatefulsets"}

// GatewayService is the NodePort Service that lets the host reach the
// gateway pods on GatewayNodePort of any node.
func GatewayService() *corev1.Service {
	return &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Name: GatewayNodePortService, Namespace: addons.Namespace, Labels: map[string]string{"app.kubernetes.io/part-of": "trellis"}},
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeNodePort,
			Selector: map[string]string{"app.kubernetes.io/name": "trellis-gateway"},
			Ports: []corev1.ServicePort{{
				Name: "https", Protocol: corev1.ProtocolTCP, Port: 443,
				TargetPort: intstr.FromInt32(8443), NodePort: GatewayNodePort,
			}},
		},
	}
}

// DevRBAC is the dev identity: a ServiceAccount in ns and a Role letting
// it submit and read the workload kinds there (nothing else).
func DevRBAC(ns string) (*corev1.ServiceAccount, *rbacv1.Role, *rbacv1.RoleBinding) {
	meta := metav1.ObjectMeta{Name: DevIdentity, Namespace: ns, Labels: map[string]string{"app.kubernetes.io/part-of": "trellis"}}
	sa := &corev1.ServiceAccount{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceAccount"}, ObjectMeta: meta}
	role := &rbacv1.Role{
		TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "Role"},
		ObjectMeta: meta,
		Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{"workloads.trellis.dev"},
			Resources: workloadResources,
			Verbs:     []string{"get", "list", "watch", "create", "update", "patch"},
		}},
	}
	rb := &rbacv1.RoleBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "RoleBinding"},
		ObjectMeta: meta,
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: DevIdentity},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: DevIdentity, Namespace: ns}},
	}
	return sa, role, rb
}

// GatewayContextFiles are where the local gateway context and the files
// it names are written.
type GatewayContextFiles struct {
	Context, CA, Token string
}

// ContextFiles places the CA and token files beside the context file,
// named by cluster.
func ContextFiles(contextPath, cluster string) GatewayContextFiles {
	dir := filepath.Dir(contextPath)
	return GatewayContextFiles{
		Context: contextPath,
		CA:      filepath.Join(dir, cluster+"-gateway-ca.pem"),
		Token:   filepath.Join(dir, cluster+"-"+DevIdentity+".token"),
	}
}

// GatewayContext is the context file for a gateway reached at nodeIP:
// the CA and token are named relative to the context file.
func GatewayContext(nodeIP string, f GatewayContextFiles) *client.Context {
	return &client.Context{
		Server:               "https://" + net.JoinHostPort(nodeIP, strconv.Itoa(GatewayNodePort)),
		CertificateAuthority: filepath.Base(f.CA),
		ServerName:           GatewayServerName,
		Namespace:            SampleNamespace,
		TokenFile:            filepath.Base(f.Token),
	}
}

// gatewayContext is Up's step: the NodePort Service, the dev identity,
// a fresh token for it, the trust bundle and the context file.
func (u *up) gatewayContext(ctx context.Context) error {
	if u.o.GatewayContext == "" {
		return nil
	}
	sa, role, rb := DevRBAC(SampleNamespace)
	for _, obj := range []any{GatewayService(), sa, role, rb} {
		if err := applyObject(ctx, u.client, obj); err != nil {
			return err
		}
	}
	ttl := int64(DevTokenTTL / time.Second)
	tr, err := u.client.CoreV1().ServiceAccounts(SampleNamespace).CreateToken(ctx, DevIdentity, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{Audiences: []string{GatewayAudience}, ExpirationSeconds: &ttl},
	}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("failed to request a token for %s/%s: %w", SampleNamespace, DevIdentity, err)
	}
	cm, err := u.client.CoreV1().ConfigMaps(addons.Namespace).Get(ctx, issuer.BundleConfigMap, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("failed to read the trust bundle %s/%s: %w", addons.Namespace, issuer.BundleConfigMap, err)
	}
	bundle := cm.Data[issuer.BundleKey]
	if bundle == "" {
		return fmt.Errorf("trust bundle %s/%s has no %s", addons.Namespace, issuer.BundleConfigMap, issuer.BundleKey)
	}
	ip, err := u.nodeIP()
	if err != nil {
		return err
	}
	files := ContextFiles(u.o.GatewayContext, u.def.Name)
	if err := os.MkdirAll(filepath.Dir(files.Context), 0o700); err != nil {
		return fmt.Errorf("failed to create the folder of the gateway context: %w", err)
	}
	if err := fsync.WriteFile(files.CA, []byte(bundle), 0o644); err != nil {
		return err
	}
	if err := fsync.WriteFile(files.Token, []byte(tr.Status.Token), 0o600); err != nil {
		return err
	}
	if err := GatewayContext(ip, files).Save(files.Context); err != nil {
		return fmt.Errorf("failed to write the gateway context %s: %w", files.Context, err)
	}
	u.gatewayFiles = &files
	u.o.Log.Info("wrote the gateway context", "path", files.Context, "identity", "system:serviceaccount:"+SampleNamespace+":"+DevIdentity, "expires", tr.Status.ExpirationTimestamp.Time)
	return nil
}

// nodeIP is the control-plane node's Docker address (the host reaches NodePorts
// on it).
func (u *up) nodeIP() (string, error) {
	ns, err := u.cluster.Nodes()
	if err != nil {
		return "", err
	}
	// The control plane, not the first node listed: Docker lists nodes in
	// no fixed order, and an address that moved between runs would change
	// the console's issuer and restart the gateway for nothing.
	n, err := nodeutils.BootstrapControlPlaneNode(ns)
	if err != nil {
		return "", fmt.Errorf("find the control plane of cluster %s: %w", u.def.Name, err)
	}
	v4, v6, err := n.IP()
	if err != nil {
		return "", fmt.Errorf("failed to read node %s's address: %w", n.String(), err)
	}
	if v4 != "" {
		return v4, nil
	}
	return v6, nil
}

// applyObject server-side applies a typed object (with TypeMeta set).
func applyObject(ctx context.Context, cs kubernetes.Interface, obj any) error {
	b, err := json.Marshal(obj)
	if err != nil {
		return fmt.Errorf("failed to encode %T to apply it: %w", obj, err)
	}
	force := true
	opts := metav1.PatchOptions{FieldManager: fieldManager, Force: &force}
	var m struct {
		Kind     string            `json:"kind"`
		Metadata metav1.ObjectMeta `json:"metadata"`
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return fmt.Errorf("failed to read the kind and name of %T to apply it: %w", obj, err)
	}
	switch m.Kind {
	case "Service":
		_, err = cs.CoreV1().Services(m.Metadata.Namespace).Patch(ctx, m.Metadata.Name, types.ApplyPatchType, b, opts)
	case "ServiceAccount":
		_, err = cs.CoreV1().ServiceAccounts(m.Metadata.Namespace).Patch(ctx, m.Metadata.Name, types.ApplyPatchType, b, opts)
	case "Role":
		_, err = cs.RbacV1().Roles(m.Metadata.Namespace).Patch(ctx, m.Metadata.Name, types.ApplyPatchType, b, opts)
	case "RoleBinding":
		_, err = cs.RbacV1().RoleBindings(m.Metadata.Namespace).Patch(ctx, m.Metadata.Name, types.ApplyPatchType, b, opts)
	case "Namespace":
		_, err = cs.CoreV1().Namespaces().Patch(ctx, m.Metadata.Name, types.ApplyPatchType, b, opts)
	case "ClusterRole":
		_, err = cs.RbacV1().ClusterRoles().Patch(ctx, m.Metadata.Name, types.ApplyPatchType, b, opts)
	case "ClusterRoleBinding":
		_, err = cs.RbacV1().ClusterRoleBindings().Patch(ctx, m.Metadata.Name, types.ApplyPatchType, b, opts)
	case "Secret":
		_, err = cs.CoreV1().Secrets(m.Metadata.Namespace).Patch(ctx, m.Metadata.Name, types.ApplyPatchType, b, opts)
	case "Deployment":
		_, err = cs.AppsV1().Deployments(m.Metadata.Namespace).Patch(ctx, m.Metadata.Name, types.ApplyPatchType, b, opts)
	default:
		return fmt.Errorf("apply: unsupported kind %q", m.Kind)
	}
	if err != nil {
		return fmt.Errorf("failed to apply %s %s/%s: %w", m.Kind, m.Metadata.Namespace, m.Metadata.Name, err)
	}
	return nil
}
