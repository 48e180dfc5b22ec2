//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	v1alpha1 "github.com/trellis-dev/trellis/api/v1alpha1"
	"github.com/trellis-dev/trellis/api/wellknown"
	"github.com/trellis-dev/trellis/gateway"
	gwclient "github.com/trellis-dev/trellis/gateway/client"
)

// gatewayContext is where the suite's trellis local up writes the gateway
// context (not the user's own).
func gatewayContext() string {
	return filepath.Join(os.TempDir(), "trellis-e2e-gateway", "context.yaml")
}

// TestGatewaySubmit submits a workload through trellis-gateway with
// `trellis submit`, authenticated by a pod identity: the mTLS certificate
// the issuer gave a pod running as ServiceAccount e2e-gateway/ci (read off
// its node), authorized by a Role on that ServiceAccount. It sees the
// workload become Ready through `trellis workloads status`, and a
// submission with an unpinned image refused with the field named.
func TestGatewaySubmit(t *testing.T) {
	ctx := context.Background()
	const ns, sa = "e2e-gateway", "ci"
	must(t, ignoreExists(cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})))
	must(t, ignoreExists(cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{})))
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "submit"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{"workloads.trellis.dev"}, Resources: []string{"trellisservices"},
			Verbs: []string{"get", "list", "watch", "create", "update", "patch"}},
			// `workloads status` shows the workload's pods and events.
			{APIGroups: []string{""}, Resources: []string{"pods", "events"}, Verbs: []string{"list"}}},
	}
	// The local cluster outlives test runs: an earlier run's Role is
	// brought to these rules, not kept.
	if _, err := cs.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); apierrors.IsAlreadyExists(err) {
		_, err = cs.RbacV1().Roles(ns).Update(ctx, role, metav1.UpdateOptions{})
		must(t, err)
	} else {
		must(t, err)
	}
	must(t, ignoreExists(cs.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "submit"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "submit"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: sa, Namespace: ns}},
	}, metav1.CreateOptions{})))

	// The CI pod: its identity is spiffe://<trust>/ns/e2e-gateway/sa/ci.
	ci := trellisService(ns, "ci", "", false)
	ci.Spec.Template.NodeSelector = nil
	ci.Spec.Template.ServiceAccountName = sa
	must(t, createdOrExists(cl.Create(ctx, ci)))
	// The control-plane node is the general pool's one node: the tests
	// after this one need its CPU back.
	t.Cleanup(func() { _ = cl.Delete(context.Background(), ci) })
	pod := runningPod(t, ns, "ci")

	// The gateway context that local up wrote, with the pod's identity
	// instead of the dev token.
	local, err := gwclient.LoadContext(gatewayContext())
	must(t, err)
	dir := t.TempDir()
	cert, key := readIdentity(t, pod, dir)
	c := &gwclient.Context{Server: local.Server, CertificateAuthority: local.CertificateAuthority, ServerName: local.ServerName,
		Namespace: ns, ClientCertificate: cert, ClientKey: key}
	ctxFile := filepath.Join(dir, "context.yaml")
	must(t, c.Save(ctxFile))

	// The policy allows the kind-loaded sample's repository.
	allowRegistry(t, "docker.io/trellis")

	// A reused cluster may hold an earlier run's hello-gw: the refusal
	// below checks that nothing was written, so start without it.
	removeHelloGW := func() {
		_ = cl.Delete(context.Background(), &v1alpha1.TrellisService{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "hello-gw"}})
	}
	removeHelloGW()
	t.Cleanup(removeHelloGW)
	eventually(t, "no hello-gw left from an earlier run", time.Minute, func() (bool, string) {
		err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: "hello-gw"}, &v1alpha1.TrellisService{})
		return apierrors.IsNotFound(err), fmt.Sprintf("get: %v", err)
	})

	// Refused: the sample's image is a tag, not a digest.
	unpinned := submittable(ns, "hello-gw", "trellis/hello:0.1.0")
	out, err := trellisCLI(t, writeYAML(t, dir, "unpinned.yaml", unpinned), "submit", "--context", ctxFile, "-f")
	if err == nil {
		t.Fatalf("an unpinned image was accepted:\n%s", out)
	}
	if !strings.Contains(out, "spec.template.containers[0].image") || !strings.Contains(out, "not pinned by digest") {
		t.Errorf("the refusal does not name the field spec.template.containers[0].image:\n%s", out)
	}
	var got v1alpha1.TrellisService
	if err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: "hello-gw"}, &got); !apierrors.IsNotFound(err) {
		t.Fatalf("a refused submission was written (get: %v)", err)
	}

	// Accepted: the same image pinned by the digest the node runs.
	pinned := pinnedImage(t, pod)
	out, err = trellisCLI(t, writeYAML(t, dir, "pinned.yaml", submittable(ns, "hello-gw", pinned)), "submit", "--context", ctxFile, "--id", "e2e-"+pod.Name, "-f")
	if err != nil {
		t.Fatalf("trellis submit of %s: %v\n%s", pinned, err, out)
	}
	t.Logf("submitted:\n%s", out)
	eventually(t, "hello-gw Ready through trellis workloads status", 3*time.Minute, func() (bool, string) {
		out, err := trellisCLI(t, "", "workloads", "status", "--context", ctxFile, "TrellisService", "hello-gw")
		return err == nil && strings.Contains(out, "ready=True"), out
	})
}

// submittable is a one-replica TrellisService on image, as YAML input.
func submittable(ns, name, image string) *v1alpha1.TrellisService {
	ts := trellisService(ns, name, "", false)
	ts.TypeMeta = metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: "TrellisService"}
	ts.Spec.Template.NodeSelector = nil
	ts.Spec.Template.Containers[0].Image = image
	return ts
}

// readIdentity copies the pod's certificate and key (kept by its cert
// sidecar in a memory emptyDir) off its kind node into dir.
func readIdentity(t *testing.T, p *corev1.Pod, dir string) (cert, key string) {
	t.Helper()
	vol := ""
	for _, c := range p.Spec.Containers {
		for _, m := range c.VolumeMounts {
			if m.MountPath == wellknown.PathIdentity {
				vol = m.Name
			}
		}
	}
	if vol == "" {
		t.Fatalf("pod %s/%s mounts no identity at %s", p.Namespace, p.Name, wellknown.PathIdentity)
	}
	src := fmt.Sprintf("/var/lib/kubelet/pods/%s/volumes/kubernetes.io~empty-dir/%s", p.UID, vol)
	for _, f := range []string{wellknown.IdentityCertFile, wellknown.IdentityKeyFile} {
		b, err := exec.Command("docker", "exec", p.Spec.NodeName, "cat", src+"/"+f).Output()
		if err != nil {
			t.Fatalf("read %s of pod %s on node %s: %v", f, p.Name, p.Spec.NodeName, err)
		}
		must(t, os.WriteFile(filepath.Join(dir, f), b, 0o600))
	}
	return filepath.Join(dir, wellknown.IdentityCertFile), filepath.Join(dir, wellknown.IdentityKeyFile)
}

// pinnedImage is the hello image by the digest the pod's node resolved.
func pinnedImage(t *testing.T, p *corev1.Pod) string {
	t.Helper()
	for _, s := range p.Status.ContainerStatuses {
		if s.Name != "hello" {
			continue
		}
		id := strings.TrimPrefix(s.ImageID, "docker-pullable://")
		if i := strings.Index(id, "@sha256:"); i >= 0 {
			// The digest must name the image's own repository: a load
			// that left import-<date>@sha256:… in the CRI's cache made
			// the kubelet report docker.io/library/import-<date>.
			repo := func(ref string) string {
				ref, _, _ = strings.Cut(ref, "@")
				if j := strings.LastIndex(ref, ":"); j > strings.LastIndex(ref, "/") {
					ref = ref[:j]
				}
				return strings.TrimPrefix(ref, "docker.io/")
			}
			if repo(id) != repo(s.Image) {
				t.Fatalf("pod %s: image id %q does not name the image's repository (image %q)", p.Name, s.ImageID, s.Image)
			}
			return id
		}
		// A bare sha256:<id> is the image's config digest, not its
		// manifest digest: a pull by it fails. local up names every loaded
		// image by its manifest digest, so the kubelet reports that.
		t.Fatalf("pod %s: image id %q names no repository digest", p.Name, s.ImageID)
	}
	t.Fatalf("pod %s has no hello container status", p.Name)
	return ""
}

// allowRegistry adds r to the gateway policy's allowed registries for the
// test, restoring the policy after it.
func allowRegistry(t *testing.T, r string) {
	t.Helper()
	ctx := context.Background()
	cms := cs.CoreV1().ConfigMaps("trellis-system")
	cm, err := cms.Get(ctx, gateway.PolicyConfigMap, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		cm, err = cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: gateway.PolicyConfigMap}}, metav1.CreateOptions{})
	}
	must(t, err)
	before := cm.Data[gateway.PolicyKeyRegistries]
	if cm.Data == nil {
		cm.Data = map[string]string{}
	}
	cm.Data[gateway.PolicyKeyRegistries] = before + "\n" + r + "\n"
	_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
	must(t, err)
	t.Cleanup(func() {
		cm, err := cms.Get(context.Background(), gateway.PolicyConfigMap, metav1.GetOptions{})
		if err == nil {
			cm.Data[gateway.PolicyKeyRegistries] = before
			_, _ = cms.Update(context.Background(), cm, metav1.UpdateOptions{})
		}
	})
	// The gateway reloads its policy from a watch.
	time.Sleep(3 * time.Second)
}

// trellisCLI runs bin/trellis with args (then file, when set) and returns
// its combined output.
func trellisCLI(t *testing.T, file string, args ...string) (string, error) {
	t.Helper()
	if file != "" {
		args = append(args, file)
	}
	cmd := exec.Command(filepath.Join(root, "bin", "trellis"), args...)
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func writeYAML(t *testing.T, dir, name string, obj any) string {
	t.Helper()
	b, err := yaml.Marshal(obj)
	must(t, err)
	p := filepath.Join(dir, name)
	must(t, os.WriteFile(p, b, 0o600))
	return p
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func ignoreExists[T any](_ T, err error) error {
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

func createdOrExists(err error) error {
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}
