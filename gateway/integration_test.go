package gateway_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/trellis-dev/trellis/api/v1alpha1"
	"github.com/trellis-dev/trellis/gateway"
	"github.com/trellis-dev/trellis/gateway/api"
	gwclient "github.com/trellis-dev/trellis/gateway/client"
	"github.com/trellis-dev/trellis/internal/pki"
)

// refused asserts err is a gateway refusal with code, and that every
// want string appears in its message or problems.
func refused(t *testing.T, err error, code int, want ...string) *gwclient.Error {
	t.Helper()
	var ge *gwclient.Error
	if !errors.As(err, &ge) {
		t.Fatalf("want a %d refusal, got %v", code, err)
	}
	if ge.Code != code {
		t.Fatalf("want %d, got %v", code, ge)
	}
	for _, w := range want {
		if !strings.Contains(ge.Error(), w) {
			t.Errorf("refusal does not say %q:\n%v", w, ge)
		}
	}
	return ge
}

// nothingWritten asserts the apiserver has no workload ns/name of kind.
func (e *env) nothingWritten(resource, ns, name string) {
	e.t.Helper()
	_, err := e.dyn.Resource(v1alpha1.GroupVersion.WithResource(resource)).Namespace(ns).Get(context.Background(), name, metav1.GetOptions{})
	if !apierrors.IsNotFound(err) {
		e.t.Errorf("%s %s/%s was written (get: %v)", resource, ns, name, err)
	}
}

func TestIntegrationGateway(t *testing.T) {
	e := startEnv(t, gateway.Config{RatePerSecond: 0.5, RateBurst: 100})
	ctx := context.Background()
	ci := e.pod("team-a", "ci")
	// probe waits for the gateway to see a change, with its own rate limit.
	probe := e.pod("team-a", "probe")

	t.Run("StoppedBeforeReady", func(t *testing.T) {
		// A gateway told to stop while its cache syncs stops cleanly: the
		// console's tests stop theirs as soon as they are done.
		for _, after := range []time.Duration{0, time.Millisecond, 20 * time.Millisecond} {
			gw, err := gateway.New(gateway.Config{Rest: e.cp.Config, Audit: io.Discard})
			must(t, err)
			ctx, cancel := context.WithTimeout(context.Background(), after)
			err = gw.Run(ctx)
			cancel()
			if err != nil {
				t.Errorf("stopped %s after the start: Run returned %v, want nil", after, err)
			}
		}
	})

	t.Run("BadInput", func(t *testing.T) {
		e.quota("team-a", "compute", "16", "12")
		waitFor(t, "the gateway refuses a workload over quota", func() bool {
			_, err := probe.Submit(ctx, service("hog", replicas(7), cpu("1")), gwclient.SubmitOptions{DryRun: true})
			var ge *gwclient.Error
			return errors.As(err, &ge) && ge.Code == 422
		})
		defer func() {
			_ = e.cp.Client.CoreV1().ResourceQuotas("team-a").Delete(ctx, "compute", metav1.DeleteOptions{})
		}()
		big := service("big", extraSpec("  runtime:\n    config:\n      blob: \""+strings.Repeat("x", api.MaxBody)+"\"\n"))
		otherRoot, err := pki.NewRoot(trustDomain, 4*time.Hour, time.Now().Add(-time.Hour))
		must(t, err)
		otherSigner, err := pki.NewIntermediate(otherRoot, trustDomain, 4*time.Hour, time.Now().Add(-time.Hour))
		must(t, err)
		foreignChain, foreignKey := issue(t, pki.NewState(otherRoot, otherSigner), podID("team-a", "ci"), time.Hour, time.Now())
		expiredChain, expiredKey := e.leaf(podID("team-a", "ci"), time.Hour, time.Now().Add(-3*time.Hour))
		cases := []struct {
			name     string
			c        *gwclient.Client
			body     []byte
			resource string
			ns, obj  string
			code     int
			want     []string
		}{
			{"malformed YAML", ci, []byte("apiVersion: workloads.trellis.dev/v1alpha1\nkind: TrellisService\nmetadata: [name: x\n"), "trellisservices", "team-a", "x", 400, []string{"malformed"}},
			{"body over 1 MiB", ci, big, "trellisservices", "team-a", "big", 413, []string{"1 MiB"}},
			{"unknown kind", ci, bytes.Replace(service("k"), []byte("kind: TrellisService"), []byte("kind: TrellisWidget"), 1), "trellisservices", "team-a", "k", 400, []string{"kind:", `unknown kind "TrellisWidget"`}},
			{"unknown field", ci, service("u", extraSpec("  replicaz: 3\n")), "trellisservices", "team-a", "u", 400, []string{"spec.replicaz"}},
			{"namespace the caller may not use", ci, service("ns", namespace("team-b")), "trellisservices", "team-b", "ns", 403, []string{"may not create trellisservices in namespace team-b"}},
			{"unpinned image", ci, service("unpinned", image(registry+"/team-a/web:1.0")), "trellisservices", "team-a", "unpinned", 422, []string{"spec.template.containers[0].image", "not pinned by digest"}},
			{"registry not on the list", ci, service("reg", image("docker.io/library/nginx"+digest)), "trellisservices", "team-a", "reg", 422, []string{"spec.template.containers[0].image", "registry docker.io, which is not allowed"}},
			{"every problem at once", ci, service("both", image("quay.io/x/y:latest")), "trellisservices", "team-a", "both", 422, []string{"not pinned by digest", "registry quay.io"}},
			{"webhook validation", ci, []byte(`apiVersion: workloads.trellis.dev/v1alpha1
kind: TrellisDaemon
metadata: {name: agent, namespace: team-a}
spec:
  template:
    containers:
    - name: agent
      image: ` + registry + `/a` + digest + `
`), "trellisdaemons", "team-a", "agent", 422, []string{"[validation]", "team-a"}},
			{"over quota", ci, service("hog", replicas(7), cpu("1")), "trellisservices", "team-a", "hog", 422, []string{"[quota]", "more than team-a/compute allows: 12 of 16 used"}},
			{"expired certificate", e.mtls(expiredChain, expiredKey), service("exp"), "trellisservices", "team-a", "exp", 401, []string{"expired"}},
			{"certificate from another CA", e.mtls(foreignChain, foreignKey), service("foreign"), "trellisservices", "team-a", "foreign", 401, []string{"not issued by the Trellis issuer"}},
			{"token for another audience", e.token("team-a", "ci", "someone-else"), service("aud"), "trellisservices", "team-a", "aud", 401, []string{"Unauthorized"}},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				_, err := tc.c.Submit(ctx, tc.body, gwclient.SubmitOptions{})
				_ = refused(t, err, tc.code, tc.want...)
				e.nothingWritten(tc.resource, tc.ns, tc.obj)
			})
		}
	})

	t.Run("Signature", func(t *testing.T) {
		pub, priv, err := ed25519.GenerateKey(rand.Reader)
		must(t, err)
		_, otherPriv, err := ed25519.GenerateKey(rand.Reader)
		must(t, err)
		e.configMap("trellis-system", gateway.PolicyConfigMap, map[string]string{
			gateway.PolicyKeyRegistries: registry, gateway.PolicyKeyRequireSignature: "true",
			gateway.PolicyKeySignerPrefix + "ci": base64.StdEncoding.EncodeToString(pub),
		})
		defer func() {
			e.configMap("trellis-system", gateway.PolicyConfigMap, map[string]string{gateway.PolicyKeyRegistries: registry})
			waitFor(t, "signatures are optional again", func() bool {
				_, err := probe.Submit(ctx, service("probe"), gwclient.SubmitOptions{DryRun: true})
				return err == nil
			})
		}()
		body := service("signed")
		wrong, err := api.Sign(body, "ci", otherPriv)
		must(t, err)
		tampered, err := api.Sign(service("signed", replicas(2)), "ci", priv)
		must(t, err)
		good, err := api.Sign(body, "ci", priv)
		must(t, err)
		waitFor(t, "the policy requires signatures", func() bool {
			_, err := probe.Submit(ctx, body, gwclient.SubmitOptions{DryRun: true})
			var ge *gwclient.Error
			return errors.As(err, &ge) && ge.Code == 422
		})
		for name, sig := range map[string]string{"unsigned": "", "wrong key": wrong, "changed after signing": tampered} {
			_, err := ci.Submit(ctx, body, gwclient.SubmitOptions{Signature: sig})
			_ = refused(t, err, 422, "[signature]")
			e.nothingWritten("trellisservices", "team-a", "signed")
			t.Logf("%s: refused", name)
		}
		res, err := ci.Submit(ctx, body, gwclient.SubmitOptions{Signature: good})
		must(t, err)
		if res.Action != api.ActionCreated {
			t.Fatalf("signed submission: %+v", res)
		}
	})

	t.Run("SubmitReadYourWritesReplay", func(t *testing.T) {
		for i := range 10 {
			name := fmt.Sprintf("web-%d", i)
			res, err := ci.Submit(ctx, service(name), gwclient.SubmitOptions{ID: "build-" + name})
			must(t, err)
			if res.Action != api.ActionCreated || res.FieldManager != "system:serviceaccount:team-a:ci" {
				t.Fatalf("submit %s: %+v", name, res)
			}
			// Read right after the write: the cache must already hold it.
			st, err := ci.Status(ctx, "team-a", "trellisservices", name)
			must(t, err)
			if st.Workload.ResourceVersion != res.ResourceVersion {
				t.Fatalf("read after write of %s: cache at %s, wrote %s", name, st.Workload.ResourceVersion, res.ResourceVersion)
			}
		}
		// The field manager is the caller.
		u, err := e.dyn.Resource(v1alpha1.GroupVersion.WithResource("trellisservices")).Namespace("team-a").Get(ctx, "web-0", metav1.GetOptions{})
		must(t, err)
		var managers []string
		for _, m := range u.GetManagedFields() {
			managers = append(managers, m.Manager)
		}
		if !strings.Contains(strings.Join(managers, ","), "system:serviceaccount:team-a:ci") {
			t.Errorf("field managers %v lack the caller", managers)
		}
		// A retry returns the first result and writes nothing.
		res, err := ci.Submit(ctx, service("web-0"), gwclient.SubmitOptions{ID: "build-web-0"})
		must(t, err)
		if !res.Replayed || res.ResourceVersion != u.GetResourceVersion() {
			t.Fatalf("retry: %+v (stored at %s)", res, u.GetResourceVersion())
		}
		// The same id with another body is a conflict, and writes nothing.
		_, err = ci.Submit(ctx, service("web-0", replicas(3)), gwclient.SubmitOptions{ID: "build-web-0"})
		_ = refused(t, err, 409, "was used for a different body")
		after, err := e.dyn.Resource(v1alpha1.GroupVersion.WithResource("trellisservices")).Namespace("team-a").Get(ctx, "web-0", metav1.GetOptions{})
		must(t, err)
		if after.GetResourceVersion() != u.GetResourceVersion() {
			t.Errorf("a conflicting submission wrote: %s -> %s", u.GetResourceVersion(), after.GetResourceVersion())
		}
		// A dry run shows the diff and writes nothing.
		res, err = ci.Submit(ctx, service("web-0", replicas(3)), gwclient.SubmitOptions{DryRun: true})
		must(t, err)
		if res.Action != api.ActionUpdated || !strings.Contains(res.Diff, "replicas") || len(res.Checks) != 6 {
			t.Errorf("dry run: %+v", res)
		}
		after, err = e.dyn.Resource(v1alpha1.GroupVersion.WithResource("trellisservices")).Namespace("team-a").Get(ctx, "web-0", metav1.GetOptions{})
		must(t, err)
		if after.GetResourceVersion() != u.GetResourceVersion() {
			t.Errorf("a dry run wrote: %s -> %s", u.GetResourceVersion(), after.GetResourceVersion())
		}
		res, err = ci.Submit(ctx, service("web-new"), gwclient.SubmitOptions{DryRun: true})
		must(t, err)
		if res.Action != api.ActionCreated {
			t.Errorf("dry run of a new workload: %+v", res)
		}
		e.nothingWritten("trellisservices", "team-a", "web-new")
	})

	t.Run("RateLimit", func(t *testing.T) {
		burst := e.pod("team-a", "burst")
		for i := range 100 {
			_, err := burst.Submit(ctx, []byte("not: [yaml"), gwclient.SubmitOptions{})
			_ = refused(t, err, 400)
			_ = i
		}
		_, err := burst.Submit(ctx, service("late"), gwclient.SubmitOptions{})
		ge := refused(t, err, http.StatusTooManyRequests, "rate limit")
		if ge.RetryAfter == "" {
			t.Errorf("429 without Retry-After")
		}
		e.nothingWritten("trellisservices", "team-a", "late")
	})

	t.Run("PlacementWithoutFleet", func(t *testing.T) {
		body := append(service("placed"), []byte(`---
apiVersion: fleet.trellis.dev/v1alpha1
kind: Placement
metadata: {name: placed, namespace: team-a}
spec:
  workloads: [{kind: TrellisService, name: placed}]
`)...)
		_, err := probe.Submit(ctx, body, gwclient.SubmitOptions{})
		_ = refused(t, err, http.StatusBadRequest, "Placement", "--fleet")
		e.nothingWritten("trellisservices", "team-a", "placed")
	})

	t.Run("ZeroAPIRequestsForCachedReads", func(t *testing.T) {
		// Warm the authorization cache, then read.
		_, err := ci.List(ctx, "team-a", "trellisservices")
		must(t, err)
		_, err = ci.Status(ctx, "team-a", "trellisservices", "web-1")
		must(t, err)
		from := time.Now()
		const n = 200
		for i := range n {
			switch i % 3 {
			case 0:
				_, err = ci.List(ctx, "team-a", "trellisservices")
			case 1:
				_, err = ci.Status(ctx, "team-a", "trellisservices", "web-1")
			default:
				_, err = ci.Events(ctx, "team-a", "trellisservices", "web-1")
			}
			must(t, err)
		}
		to := time.Now()
		time.Sleep(time.Second) // the audit log is written asynchronously
		evs, err := e.cp.ReadAudit(gateway.UserAgent, from, to)
		must(t, err)
		if len(evs) != 0 {
			var b strings.Builder
			for _, ev := range evs {
				fmt.Fprintf(&b, "%s %s\n", ev.Verb, ev.Resource())
			}
			t.Errorf("%d gateway reads in %s cost %d apiserver requests:\n%s", n, to.Sub(from), len(evs), b.String())
		}
		t.Logf("%d reads in %s, %d apiserver requests", n, to.Sub(from).Round(time.Millisecond), len(evs))
	})

	t.Run("Watch", func(t *testing.T) {
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		got := make(chan api.WatchEvent, 100)
		go func() { _ = ci.Watch(wctx, "team-a", "trellisservices", func(ev api.WatchEvent) { got <- ev }) }()
		if _, err := ci.Submit(ctx, service("watched"), gwclient.SubmitOptions{}); err != nil {
			t.Fatal(err)
		}
		for {
			select {
			case ev := <-got:
				if ev.Workload.Name == "watched" {
					return
				}
			case <-wctx.Done():
				t.Fatal("no watch event for the submitted workload")
			}
		}
	})

	t.Run("Audit", func(t *testing.T) {
		out := e.audit.String()
		for _, want := range []string{`"decision":"refused"`, `"decision":"accepted"`, `"user":"system:serviceaccount:team-a:ci"`, `"name":"quota","result":"refused"`} {
			if !strings.Contains(out, want) {
				t.Errorf("audit stream lacks %s", want)
			}
		}
	})
}

// TestIntegrationAuthorizationMatrix checks identities × namespaces ×
// verbs against the cluster's real RBAC, through both authentication
// methods.
func TestIntegrationAuthorizationMatrix(t *testing.T) {
	e := startEnv(t, gateway.Config{})
	ctx := context.Background()
	// Quotas are core resources: only team-b's viewer may list team-b's.
	_, err := e.cp.Client.RbacV1().Roles("team-b").Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "quota-viewer"}, Rules: []rbacv1.PolicyRule{{
		APIGroups: []string{""}, Resources: []string{"resourcequotas"}, Verbs: []string{"list"},
	}}}, metav1.CreateOptions{})
	must(t, err)
	_, err = e.cp.Client.RbacV1().RoleBindings("team-b").Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "quota-viewer"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: "team-b", Name: "viewer"}},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "quota-viewer"}}, metav1.CreateOptions{})
	must(t, err)
	callers := map[string]*gwclient.Client{
		"team-a/ci (mTLS)":      e.pod("team-a", "ci"),
		"team-a/ci (token)":     e.token("team-a", "ci", audience),
		"team-b/viewer (token)": e.token("team-b", "viewer", audience),
		"team-b/viewer (mTLS)":  e.pod("team-b", "viewer"),
		"other/nobody (mTLS)":   e.pod("other", "nobody"),
		"other/nobody (token)":  e.token("other", "nobody", audience),
	}
	allowed := map[string]bool{
		"team-a/ci team-a create": true, "team-a/ci team-a list": true, "team-a/ci team-a get": true, "team-a/ci team-a watch": true,
		"team-b/viewer team-b list": true, "team-b/viewer team-b get": true, "team-b/viewer team-b watch": true,
		"team-b/viewer team-b quotas": true,
	}
	for caller, c := range callers {
		who, _, _ := strings.Cut(caller, " ")
		for _, ns := range []string{"team-a", "team-b"} {
			for _, verb := range []string{"create", "list", "get", "watch", "quotas"} {
				var err error
				switch verb {
				case "create":
					_, err = c.Submit(ctx, service("m", namespace(ns)), gwclient.SubmitOptions{DryRun: true})
				case "list":
					_, err = c.List(ctx, ns, "trellisservices")
				case "get":
					_, err = c.Status(ctx, ns, "trellisservices", "absent")
				case "quotas":
					_, err = c.Quotas(ctx, ns)
				case "watch":
					wctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
					err = c.Watch(wctx, ns, "trellisservices", func(api.WatchEvent) {})
					cancel()
				}
				var ge *gwclient.Error
				denied := errors.As(err, &ge) && ge.Code == http.StatusForbidden
				want := allowed[who+" "+ns+" "+verb]
				if denied == want {
					t.Errorf("%s %s in %s: allowed=%v, want %v (err %v)", caller, verb, ns, !denied, want, err)
				}
				if !denied && err != nil && (!errors.As(err, &ge) || ge.Code != http.StatusNotFound) {
					t.Errorf("%s %s in %s: %v", caller, verb, ns, err)
				}
			}
		}
		e.nothingWritten("trellisservices", "team-a", "m")
	}
	// A workload's status carries its pods and events, read from the
	// gateway's cache: get on the workload is not enough.
	_, err = e.pod("team-a", "ci").Submit(ctx, service("seen"), gwclient.SubmitOptions{})
	must(t, err)
	e.role("team-a", "getter", []string{"get"}, "peek")
	_, err = e.cp.Client.CoreV1().ServiceAccounts("team-a").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "peek"}}, metav1.CreateOptions{})
	must(t, err)
	peek := e.token("team-a", "peek", audience)
	for what, read := range map[string]func() error{
		"status": func() error { _, err := peek.Status(ctx, "team-a", "trellisservices", "seen"); return err },
		"events": func() error { _, err := peek.Events(ctx, "team-a", "trellisservices", "seen"); return err },
	} {
		var ge *gwclient.Error
		if err := read(); !errors.As(err, &ge) || ge.Code != http.StatusForbidden || !strings.Contains(ge.Body.Message, "may not list") {
			t.Errorf("%s of a workload by a caller with get but not list pods or events: %v, want 403 naming the list", what, err)
		}
	}
	if _, err := e.pod("team-a", "ci").Status(ctx, "team-a", "trellisservices", "seen"); err != nil {
		t.Errorf("status by a caller who may list pods and events: %v", err)
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
