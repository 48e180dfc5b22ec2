package addons

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/trellis-dev/trellis/bootstrap/definition"
	"github.com/trellis-dev/trellis/internal/testutil/cluster"
)

func load(t *testing.T, name string) *definition.ClusterDefinition {
	t.Helper()
	l, err := definition.Load(filepath.Join("../clusters", name+".yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return l.ClusterDefinition
}

// TestIndexFlowSchemas: cluster validation checks the FlowSchemas the
// index names; they must be the ones the addon ships.
func TestIndexFlowSchemas(t *testing.T) {
	rendered, err := Render(load(t, "prod-us-east-1"))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rendered {
		var got []string
		for _, o := range r.Objects {
			if o.GetKind() == "FlowSchema" {
				got = append(got, o.GetName())
			}
		}
		if !slices.Equal(got, r.Addon.FlowSchemas) {
			t.Errorf("addon %s ships FlowSchemas %v, config/manifests/index.yaml names %v", r.Addon.Name, got, r.Addon.FlowSchemas)
		}
	}
}

func TestOrder(t *testing.T) {
	rendered, err := Render(load(t, "local"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range rendered {
		names = append(names, r.Addon.Name)
	}
	got := strings.Join(names, " ")
	want := "trellis-netd trellis-cert-issuer trellis-cert-agent trellis-log-shipper zookeeper trellis-zk-registrar trellis-controller trellis-flowcontrol trellis-gateway trellis-quota"
	if got != want {
		t.Errorf("order:\n got %s\nwant %s", got, want)
	}
	cyclic := []Addon{{Name: "a", Version: "1", DependsOn: []string{"b"}}, {Name: "b", Version: "1", DependsOn: []string{"a"}}}
	if _, err := order(cyclic, &definition.ClusterDefinition{Addons: []definition.Addon{{Name: "a"}, {Name: "b"}}}); err == nil || !strings.Contains(err.Error(), "cycle") {
		t.Errorf("cycle: %v", err)
	}
	if _, err := Render(&definition.ClusterDefinition{Addons: []definition.Addon{{Name: "trellis-netd", Version: "9.9.9"}}}); err == nil {
		t.Error("a version outside the bundle rendered")
	}
}

// TestIntegrationApply applies the local bundle to a real apiserver: in
// order, CRDs served before the controller, secrets seeded; a second apply
// changes nothing; a changed value re-applies only the addons it touches.
func TestIntegrationApply(t *testing.T) {
	// Node daemons run privileged, as kops and kind clusters allow.
	cp := cluster.Start(t, cluster.Options{APIServerFlags: []string{"--allow-privileged=true"}})
	ctx := context.Background()
	a, err := NewApplier(cp.Config, nil)
	if err != nil {
		t.Fatal(err)
	}
	def := load(t, "local")
	rendered, err := Render(def)
	if err != nil {
		t.Fatal(err)
	}
	res, err := a.Apply(ctx, rendered)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Action != "applied" {
			t.Errorf("first apply: %+v", r)
		}
	}
	for _, ds := range []string{"trellis-netd", "trellis-cert-agent", "trellis-zk-registrar", "trellis-log-shipper"} {
		if _, err := cp.Client.AppsV1().DaemonSets(Namespace).Get(ctx, ds, metav1.GetOptions{}); err != nil {
			t.Errorf("DaemonSet %s: %v", ds, err)
		}
	}
	for _, d := range []string{"trellis-cert-issuer", "trellis-controller"} {
		if _, err := cp.Client.AppsV1().Deployments(Namespace).Get(ctx, d, metav1.GetOptions{}); err != nil {
			t.Errorf("Deployment %s: %v", d, err)
		}
	}
	if out, err := cp.Kubectl(ctx, "get", "trellisservices", "-A"); err != nil {
		t.Errorf("the workload CRDs are not served: %v\n%s", err, out)
	}
	if _, err := cp.Client.CoreV1().Secrets(Namespace).Get(ctx, "trellis-zk-digest", metav1.GetOptions{}); err != nil {
		t.Errorf("zk digest secret: %v", err)
	}

	if changes, err := a.Diff(ctx, rendered); err != nil || len(changes) != 0 {
		t.Errorf("diff right after apply: %v %+v", err, changes)
	}
	res, err = a.Apply(ctx, rendered)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Action != "unchanged" {
			t.Errorf("second apply: %+v", r)
		}
	}
	def.Runtime.TrustDomain = "other.example"
	rendered, err = Render(def)
	if err != nil {
		t.Fatal(err)
	}
	changes, err := a.Diff(ctx, rendered)
	if err != nil {
		t.Fatal(err)
	}
	var diff []string
	for _, c := range changes {
		diff = append(diff, c.Op+" "+c.Key)
	}
	if got := strings.Join(diff, "; "); got != "update Deployment trellis-system/trellis-cert-issuer; update DaemonSet trellis-system/trellis-cert-agent; update Deployment trellis-system/trellis-gateway" {
		t.Errorf("diff after changing the trust domain: %s", got)
	}
	res, err = a.Apply(ctx, rendered)
	if err != nil {
		t.Fatal(err)
	}
	var applied []string
	for _, r := range res {
		if r.Action == "applied" {
			applied = append(applied, r.Addon)
		}
	}
	// The gateway checks callers' SPIFFE IDs against the trust domain.
	if strings.Join(applied, " ") != "trellis-cert-issuer trellis-cert-agent trellis-gateway" {
		t.Errorf("after changing the trust domain, applied %v; want the issuer, the agent and the gateway only", applied)
	}
	d, err := cp.Client.AppsV1().Deployments(Namespace).Get(ctx, "trellis-cert-issuer", metav1.GetOptions{})
	if err != nil || !strings.Contains(strings.Join(d.Spec.Template.Spec.Containers[0].Args, " "), "--trust-domain=other.example") {
		t.Errorf("issuer args after the change: %v", err)
	}

	// An addon dropped from the definition: its objects are pruned.
	def.Addons = slices.DeleteFunc(def.Addons, func(a definition.Addon) bool { return a.Name == "trellis-log-shipper" })
	rendered, err = Render(def)
	if err != nil {
		t.Fatal(err)
	}
	changes, err = a.Diff(ctx, rendered)
	if err != nil {
		t.Fatal(err)
	}
	deletes := 0
	for _, c := range changes {
		if c.Op != "delete" || !strings.Contains(c.Key, "trellis-log-shipper") {
			t.Errorf("diff after dropping the log shipper: %+v", c)
		}
		deletes++
	}
	if deletes != 4 {
		t.Errorf("diff shows %d deletions, want the log shipper's 4 objects", deletes)
	}
	if _, err := a.Apply(ctx, rendered); err != nil {
		t.Fatal(err)
	}
	if _, err := cp.Client.AppsV1().DaemonSets(Namespace).Get(ctx, "trellis-log-shipper", metav1.GetOptions{}); err == nil {
		t.Error("the dropped addon's DaemonSet survived the apply")
	}
	rec, _ := cp.Client.CoreV1().ConfigMaps(Namespace).Get(ctx, RecordConfigMap, metav1.GetOptions{})
	if _, ok := rec.Data["trellis-log-shipper"]; ok {
		t.Error("the dropped addon is still recorded")
	}
}
