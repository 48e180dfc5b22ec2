package local

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/trellis-dev/trellis/addons"
	"github.com/trellis-dev/trellis/internal/fsync"
	"github.com/trellis-dev/trellis/internal/oidcdev"
)

const (
	// OIDCImage is the local OIDC provider's image (cmd/trellis-oidc-dev).
	OIDCImage = "trellis/oidc-dev:0.1.0"
	// OIDCName names the provider's Deployment, Service and Secret.
	OIDCName = "trellis-oidc-dev"
	// OIDCNodePort is where the host and the gateway reach the provider
	// (plain HTTP on every node's address: a development provider).
	OIDCNodePort = 30556
	// ConsoleSecret is the gateway's console settings (the addon mounts it).
	ConsoleSecret = "trellis-gateway-console"
	// ConsoleClientID is the console's client at the provider.
	ConsoleClientID = "trellis-console"
	// ConsoleUser may use the console in SampleNamespace as DevIdentity
	// may use the API; ConsoleGuest may sign in and nothing else (RBAC
	// refuses it every page).
	ConsoleUser  = "dev@trellis.local"
	ConsoleGuest = "guest@trellis.local"
	// consoleRole lets ConsoleUser read what the workload pages show.
	consoleRole = "trellis-console-dev"
)

// ConsoleAccess is how to open the local console.
type ConsoleAccess struct {
	URL string
	// User signs in with the password in PasswordFile (and Guest with
	// the one in GuestPasswordFile).
	User, PasswordFile       string
	Guest, GuestPasswordFile string
}

// consoleSecrets are the generated credentials, kept across runs in the
// provider's Secret.
type consoleSecrets struct {
	DevPassword, GuestPassword, ClientSecret, SessionKey string
}

// console is Up's step before the addons: the local OIDC provider
// (Deployment, NodePort Service, its Secret), the gateway's console
// Secret naming it, and RBAC for the dev user. The gateway reads the
// console Secret at start, so its pods are restarted when it changes.
func (u *up) console(ctx context.Context) error {
	if u.o.GatewayContext == "" {
		return nil
	}
	ip, err := u.nodeIP()
	if err != nil {
		return err
	}
	issuer := "http://" + net.JoinHostPort(ip, strconv.Itoa(OIDCNodePort))
	base := "https://" + net.JoinHostPort(ip, strconv.Itoa(GatewayNodePort)) + "/console"
	sec, err := u.consoleSecrets(ctx)
	if err != nil {
		return err
	}
	cfg := oidcdev.Config{
		Issuer: issuer, ClientID: ConsoleClientID, ClientSecret: sec.ClientSecret,
		RedirectURIs: []string{base + "/callback"},
		Users: []oidcdev.User{
			{ID: "dev", Password: sec.DevPassword, Email: ConsoleUser},
			{ID: "guest", Password: sec.GuestPassword, Email: ConsoleGuest},
		},
	}
	cfgJSON, err := json.Marshal(cfg)
	if err != nil {
		return fmt.Errorf("failed to encode the OIDC provider configuration: %w", err)
	}
	gatewayData := map[string]string{
		"issuer": issuer, "client-id": ConsoleClientID, "redirect-url": base + "/callback",
		"client-secret": sec.ClientSecret, "session-key": sec.SessionKey,
	}
	changed, err := u.consoleChanged(ctx, gatewayData)
	if err != nil {
		return err
	}
	objs := []any{namespace(addons.Namespace),
		secret(OIDCName, map[string]string{"config.json": string(cfgJSON), "dev-password": sec.DevPassword, "guest-password": sec.GuestPassword, "session-key": sec.SessionKey}),
		secret(ConsoleSecret, gatewayData), oidcDeployment(cfgJSON), oidcService()}
	role, binding := ConsoleRBAC(SampleNamespace)
	rolloutsRole, rolloutsBinding := ConsoleRolloutsRBAC()
	objs = append(objs, role, binding, rolloutsRole, rolloutsBinding)
	for _, o := range objs {
		if err := applyObject(ctx, u.client, o); err != nil {
			return fmt.Errorf("apply the local console's objects: %w", err)
		}
	}
	if changed {
		if err := u.restartGateway(ctx); err != nil {
			return err
		}
		u.o.Log.Info("restarted the gateway onto its console settings", "issuer", issuer)
	}
	acc, err := writeConsolePasswords(u.o.GatewayContext, u.def.Name, base+"/", sec)
	if err != nil {
		return err
	}
	u.consoleAccess = acc
	return nil
}

// consoleSignIn waits for the sign-in provider the console step applied.
func (u *up) consoleSignIn(ctx context.Context) error {
	if u.consoleAccess == nil {
		return nil
	}
	return u.waitOIDC(ctx)
}

// consoleSecrets reads the credentials an earlier run generated, or
// generates them.
func (u *up) consoleSecrets(ctx context.Context) (consoleSecrets, error) {
	s, err := u.client.CoreV1().Secrets(addons.Namespace).Get(ctx, OIDCName, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return consoleSecrets{}, fmt.Errorf("read the local OIDC provider's secret: %w", err)
	default:
		var c oidcdev.Config
		if json.Unmarshal(s.Data["config.json"], &c) == nil && c.ClientSecret != "" && len(s.Data["dev-password"]) > 0 && len(s.Data["guest-password"]) > 0 && len(s.Data["session-key"]) >= 32 {
			return consoleSecrets{DevPassword: string(s.Data["dev-password"]), GuestPassword: string(s.Data["guest-password"]), ClientSecret: c.ClientSecret, SessionKey: string(s.Data["session-key"])}, nil
		}
	}
	return consoleSecrets{DevPassword: randomString(18), GuestPassword: randomString(18), ClientSecret: randomString(32), SessionKey: randomString(48)}, nil
}

// consoleChanged says whether the gateway's console Secret differs from
// data (the gateway must then restart to read it).
func (u *up) consoleChanged(ctx context.Context, data map[string]string) (bool, error) {
	s, err := u.client.CoreV1().Secrets(addons.Namespace).Get(ctx, ConsoleSecret, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("read the gateway's console settings: %w", err)
	}
	have := map[string]string{}
	for k, v := range s.Data {
		have[k] = string(v)
	}
	return !maps.Equal(have, data), nil
}

// restartGateway deletes the gateway's pods and, if its Deployment has
// replicas, waits until that many new pods are Ready. The count is the
// Deployment's, not the pods listed: right after the images step the list
// also holds pods already terminating, which are never replaced one for one.
func (u *up) restartGateway(ctx context.Context) error {
	d, err := u.client.AppsV1().Deployments(addons.Namespace).Get(ctx, gatewayName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read the gateway's Deployment: %w", err)
	}
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	pods := u.client.CoreV1().Pods(addons.Namespace)
	sel := metav1.ListOptions{LabelSelector: gatewaySelector}
	old, err := pods.List(ctx, sel)
	if err != nil {
		return fmt.Errorf("list the gateway's pods: %w", err)
	}
	if len(old.Items) == 0 || want == 0 {
		return nil
	}
	gone := map[string]bool{}
	for _, p := range old.Items {
		gone[p.Name] = true
	}
	if err := pods.DeleteCollection(ctx, metav1.DeleteOptions{}, sel); err != nil {
		return fmt.Errorf("restart the gateway onto its console settings: %w", err)
	}
	// last is what the latest list saw; a list that fails (near the
	// deadline the client's rate limiter refuses in advance) keeps it.
	last := "no pods listed yet"
	seen := false
	err = wait.PollUntilContextTimeout(ctx, time.Second, u.wait(), true, func(ctx context.Context) (bool, error) {
		l, err := pods.List(ctx, sel)
		if err != nil {
			if !seen {
				last = "list the gateway's pods: " + err.Error()
			}
			return false, nil
		}
		seen = true
		ready := 0
		var states []string
		for _, p := range l.Items {
			if gone[p.Name] || p.DeletionTimestamp != nil {
				continue
			}
			if podReady(&p) {
				ready++
			}
			states = append(states, podState(&p))
		}
		last = fmt.Sprintf("%d of %d new pods Ready: %s", ready, want, strings.Join(states, ", "))
		return ready >= int(want), nil
	})
	if err != nil {
		return fmt.Errorf("the gateway did not come back after its restart onto the console settings (%s): %w", last, err)
	}
	return nil
}

// podState is a pod's name, phase and the first reason a container waits,
// for an error a person can act on.
func podState(p *corev1.Pod) string {
	s := p.Name + " " + string(p.Status.Phase)
	for _, cs := range append(append([]corev1.ContainerStatus{}, p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
		if w := cs.State.Waiting; w != nil && w.Reason != "" {
			return s + " (" + cs.Name + ": " + w.Reason + ")"
		}
	}
	return s
}

const gatewayName = "trellis-gateway"

const gatewaySelector = "app.kubernetes.io/name=trellis-gateway"

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// wait is how long a step waits for pods (Options.Wait, else 3 minutes).
func (u *up) wait() time.Duration {
	if u.o.Wait > 0 {
		return u.o.Wait
	}
	return 3 * time.Minute
}

// waitOIDC waits until the provider's Deployment is available.
func (u *up) waitOIDC(ctx context.Context) error {
	timeout := u.wait()
	var last string
	err := wait.PollUntilContextTimeout(ctx, time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		d, err := u.client.AppsV1().Deployments(addons.Namespace).Get(ctx, OIDCName, metav1.GetOptions{})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		last = fmt.Sprintf("%d of %d replicas available", d.Status.AvailableReplicas, *d.Spec.Replicas)
		return d.Status.ObservedGeneration >= d.Generation && d.Status.UpdatedReplicas == *d.Spec.Replicas && d.Status.AvailableReplicas == *d.Spec.Replicas, nil
	})
	if err != nil {
		return fmt.Errorf("the local OIDC provider %s/%s is not available after %s (%s): %w", addons.Namespace, OIDCName, timeout, last, err)
	}
	return nil
}

// writeConsolePasswords writes the two users' passwords beside the
// gateway context (mode 0600); they are never printed or logged.
func writeConsolePasswords(contextPath, cluster, url string, s consoleSecrets) (*ConsoleAccess, error) {
	dir := filepath.Dir(contextPath)
	acc := &ConsoleAccess{
		URL:  url,
		User: ConsoleUser, PasswordFile: filepath.Join(dir, cluster+"-console-dev.password"),
		Guest: ConsoleGuest, GuestPasswordFile: filepath.Join(dir, cluster+"-console-guest.password"),
	}
	// On a new machine the context's folder is not there yet: the gateway
	// context step, which also makes it, comes later.
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("make the folder of the console's passwords: %w", err)
	}
	if err := fsync.WriteFile(acc.PasswordFile, []byte(s.DevPassword+"\n"), 0o600); err != nil {
		return nil, err
	}
	if err := fsync.WriteFile(acc.GuestPasswordFile, []byte(s.GuestPassword+"\n"), 0o600); err != nil {
		return nil, err
	}
	return acc, nil
}

func randomString(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

var localLabels = map[string]string{"app.kubernetes.io/part-of": "trellis"}

func namespace(name string) *corev1.Namespace {
	return &corev1.Namespace{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"}, ObjectMeta: metav1.ObjectMeta{Name: name}}
}

func secret(name string, data map[string]string) *corev1.Secret {
	b := map[string][]byte{}
	for k, v := range data {
		b[k] = []byte(v)
	}
	return &corev1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: addons.Namespace, Labels: localLabels},
		Type:       corev1.SecretTypeOpaque, Data: b,
	}
}

// hash is a short digest of b (a pod template annotation).
func hash(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:8])
}

// ConsoleRBAC lets ConsoleUser use the console in ns: the dev identity's
// Role (submit and read the workload kinds) and read access to the pods,
// events and quotas the pages show.
func ConsoleRBAC(ns string) (*rbacv1.Role, *rbacv1.RoleBinding) {
	meta := metav1.ObjectMeta{Name: consoleRole, Namespace: ns, Labels: localLabels}
	role := &rbacv1.Role{
		TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "Role"},
		ObjectMeta: meta,
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{"workloads.trellis.dev"}, Resources: workloadResources, Verbs: []string{"get", "list", "watch", "create", "update", "patch"}},
			{APIGroups: []string{""}, Resources: []string{"pods", "events", "resourcequotas"}, Verbs: []string{"get", "list", "watch"}},
		},
	}
	rb := &rbacv1.RoleBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "RoleBinding"},
		ObjectMeta: meta,
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: consoleRole},
		Subjects:   []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "User", Name: "oidc:" + ConsoleUser}},
	}
	return role, rb
}

// ConsoleRolloutsRBAC lets ConsoleUser see the AMI rollouts page and
// pause, resume or abort from it (console.RolloutResource and
// RolloutControl; cluster scoped). The local cluster's one person is its
// operator; the guest gets none of it.
func ConsoleRolloutsRBAC() (*rbacv1.ClusterRole, *rbacv1.ClusterRoleBinding) {
	meta := metav1.ObjectMeta{Name: consoleRole + "-rollouts", Labels: localLabels}
	role := &rbacv1.ClusterRole{
		TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole"},
		ObjectMeta: meta,
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{"workloads.trellis.dev"}, Resources: []string{"amirollouts"}, Verbs: []string{"get"}},
			{APIGroups: []string{"workloads.trellis.dev"}, Resources: []string{"amirollouts/control"}, Verbs: []string{"update"}},
		},
	}
	rb := &rbacv1.ClusterRoleBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRoleBinding"},
		ObjectMeta: meta,
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: meta.Name},
		Subjects:   []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "User", Name: "oidc:" + ConsoleUser}},
	}
	return role, rb
}

func oidcDeployment(config []byte) *appsv1.Deployment {
	labels := map[string]string{"app.kubernetes.io/name": OIDCName, "app.kubernetes.io/part-of": "trellis"}
	one := int32(1)
	no := false
	yes := true
	uid := int64(65532)
	return &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Name: OIDCName, Namespace: addons.Namespace, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: &one,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app.kubernetes.io/name": OIDCName}},
			Template: corev1.PodTemplateSpec{
				// The config's hash rolls the pod when it changes (its keys
				// and sessions live in memory, so nothing is lost).
				ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: map[string]string{"trellis.dev/config-hash": hash(config)}},
				Spec: corev1.PodSpec{
					Containers: []corev1.Container{{
						Name: "oidc", Image: OIDCImage, ImagePullPolicy: corev1.PullIfNotPresent,
						Args:  []string{"--listen=:5556", "--config=/etc/trellis-oidc-dev/config.json"},
						Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 5556}},
						ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
							Path: "/.well-known/openid-configuration", Port: intstr.FromString("http"),
						}}, PeriodSeconds: 2},
						VolumeMounts: []corev1.VolumeMount{{Name: "config", MountPath: "/etc/trellis-oidc-dev", ReadOnly: true}},
						SecurityContext: &corev1.SecurityContext{
							RunAsNonRoot: &yes, RunAsUser: &uid, AllowPrivilegeEscalation: &no, ReadOnlyRootFilesystem: &yes,
							Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
						},
					}},
					Volumes: []corev1.Volume{{Name: "config", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
						SecretName: OIDCName, Items: []corev1.KeyToPath{{Key: "config.json", Path: "config.json"}},
					}}}},
				},
			},
		},
	}
}

func oidcService() *corev1.Service {
	return &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Name: OIDCName, Namespace: addons.Namespace, Labels: localLabels},
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeNodePort,
			Selector: map[string]string{"app.kubernetes.io/name": OIDCName},
			Ports: []corev1.ServicePort{{
				Name: "http", Protocol: corev1.ProtocolTCP, Port: 5556,
				TargetPort: intstr.FromString("http"), NodePort: OIDCNodePort,
			}},
		},
	}
}
