package gateway_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/trellis-dev/trellis/api/wellknown"
	"github.com/trellis-dev/trellis/controller/inject"
	"github.com/trellis-dev/trellis/gateway"
	"github.com/trellis-dev/trellis/gateway/api"
	gwclient "github.com/trellis-dev/trellis/gateway/client"
)

// TestIntegrationListLastEventNeedsListEvents lists team-a's workloads as
// ci (who may list events there) and as auditor (who may list the
// workloads, not the events): ci sees each workload's most recent event,
// auditor the list without events and the refusal that hides them.
func TestIntegrationListLastEventNeedsListEvents(t *testing.T) {
	e := startEnv(t, gateway.Config{})
	ctx := context.Background()
	kc := e.cp.Client
	_, err := kc.RbacV1().Roles("team-a").Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "auditor"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{"workloads.trellis.dev"}, Resources: []string{"trellisservices", "trellisdaemons"}, Verbs: []string{"list", "watch"}}}}, metav1.CreateOptions{})
	must(t, err)
	_, err = kc.RbacV1().RoleBindings("team-a").Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "auditor"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: "team-a", Name: "auditor"}},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "auditor"}}, metav1.CreateOptions{})
	must(t, err)
	ci, auditor := e.pod("team-a", "ci"), e.pod("team-a", "auditor")
	_, err = ci.Submit(ctx, service("web"), gwclient.SubmitOptions{})
	must(t, err)
	base := time.Now().Add(-time.Hour).Truncate(time.Second)
	for i, ev := range []struct{ reason, msg string }{{"Scheduled", "2 pods scheduled"}, {"BackOff", "Back-off pulling image registry.example.com/web"}, {"Created", "older, listed last"}} {
		at := metav1.NewTime(base.Add([]time.Duration{time.Minute, 3 * time.Minute, 2 * time.Minute}[i]))
		_, err := kc.CoreV1().Events("team-a").Create(ctx, &corev1.Event{ObjectMeta: metav1.ObjectMeta{GenerateName: "web."},
			InvolvedObject: corev1.ObjectReference{Kind: "TrellisService", Namespace: "team-a", Name: "web", APIVersion: "workloads.trellis.dev/v1alpha1"},
			Reason:         ev.reason, Message: ev.msg, Type: corev1.EventTypeWarning, Count: 1, FirstTimestamp: at, LastTimestamp: at}, metav1.CreateOptions{})
		must(t, err)
	}

	var got *api.Event
	waitFor(t, "web's last event in ci's list", func() bool {
		l, err := ci.List(ctx, "team-a", "trellisservices")
		must(t, err)
		if l.EventsHidden != "" {
			t.Fatalf("ci may list events but the list says %q", l.EventsHidden)
		}
		for _, w := range l.Items {
			if w.Name == "web" && w.LastEvent != nil && w.LastEvent.Reason == "BackOff" {
				got = w.LastEvent
			}
		}
		return got != nil
	})
	if !got.Time.Equal(base.Add(3*time.Minute)) || got.Message != "Back-off pulling image registry.example.com/web" {
		t.Errorf("last event %+v; want BackOff at %s", got, base.Add(3*time.Minute))
	}

	l, err := auditor.List(ctx, "team-a", "trellisservices")
	must(t, err)
	if !strings.Contains(l.EventsHidden, "may not list events in namespace team-a") {
		t.Errorf("auditor's list: eventsHidden %q, want the refusal to list events", l.EventsHidden)
	}
	if len(l.Items) != 1 || l.Items[0].LastEvent != nil {
		t.Errorf("auditor's list %+v: want web without its last event", l.Items)
	}

	// The watch carries the same: ci's ADDED has web's last event, and a
	// new event about web is a MODIFIED with it; auditor's has the refusal.
	watch := func(c *gwclient.Client) (<-chan api.WatchEvent, context.CancelFunc) {
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		got := make(chan api.WatchEvent, 100)
		go func() { _ = c.Watch(wctx, "team-a", "trellisservices", func(ev api.WatchEvent) { got <- ev }) }()
		return got, cancel
	}
	next := func(who string, got <-chan api.WatchEvent) api.WatchEvent {
		t.Helper()
		select {
		case ev := <-got:
			return ev
		case <-time.After(20 * time.Second):
			t.Fatalf("%s: no watch event", who)
			return api.WatchEvent{}
		}
	}
	ciWatch, stop := watch(ci)
	defer stop()
	if ev := next("ci", ciWatch); ev.Type != api.WatchAdded || ev.Workload.LastEvent == nil || ev.Workload.LastEvent.Reason != "BackOff" || ev.EventsHidden != "" {
		t.Errorf("ci's first watch event %+v (last event %+v): want web ADDED with BackOff", ev, ev.Workload.LastEvent)
	}
	at := metav1.NewTime(time.Now().Truncate(time.Second))
	_, err = kc.CoreV1().Events("team-a").Create(ctx, &corev1.Event{ObjectMeta: metav1.ObjectMeta{GenerateName: "web."},
		InvolvedObject: corev1.ObjectReference{Kind: "TrellisService", Namespace: "team-a", Name: "web", APIVersion: "workloads.trellis.dev/v1alpha1"},
		Reason:         "Pulled", Message: "pulled at last", Type: corev1.EventTypeNormal, Count: 1, FirstTimestamp: at, LastTimestamp: at}, metav1.CreateOptions{})
	must(t, err)
	for {
		ev := next("ci after a new event", ciWatch)
		if ev.Type == api.WatchModified && ev.Workload.Name == "web" && ev.Workload.LastEvent != nil && ev.Workload.LastEvent.Reason == "Pulled" {
			break
		}
	}
	auditorWatch, stopAuditor := watch(auditor)
	defer stopAuditor()
	if ev := next("auditor", auditorWatch); ev.Workload.Name != "web" || ev.Workload.LastEvent != nil || !strings.Contains(ev.EventsHidden, "may not list events in namespace team-a") {
		t.Errorf("auditor's first watch event %+v: want web without its last event, and the refusal", ev)
	}
}

// TestIntegrationStatusShowsIdentityExpiry: the status route gives each
// pod the validity the issuer recorded on it; a malformed record is no
// date at all.
func TestIntegrationStatusShowsIdentityExpiry(t *testing.T) {
	e := startEnv(t, gateway.Config{})
	ctx := context.Background()
	ci := e.pod("team-a", "ci")
	_, err := ci.Submit(ctx, service("exp"), gwclient.SubmitOptions{})
	must(t, err)
	for name, notAfter := range map[string]string{"exp-0": "2026-11-28T13:05:00Z", "exp-1": "next tuesday"} {
		_, err := e.cp.Client.CoreV1().Pods("team-a").Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name,
			Labels:      inject.SelectorLabels("TrellisService", "exp"),
			Annotations: map[string]string{wellknown.AnnotationIdentityNotBefore: "2026-11-28T12:00:00Z", wellknown.AnnotationIdentityNotAfter: notAfter}},
			Spec: corev1.PodSpec{ServiceAccountName: "exp", Containers: []corev1.Container{{Name: "app", Image: "x"}}}}, metav1.CreateOptions{})
		must(t, err)
	}
	var pods []api.Pod
	waitFor(t, "both pods in the status", func() bool {
		st, err := ci.Status(ctx, "team-a", "trellisservices", "exp")
		must(t, err)
		pods = st.Pods
		return len(pods) == 2
	})
	if want := time.Date(2026, 11, 28, 13, 5, 0, 0, time.UTC); !pods[0].IdentityNotAfter.Equal(want) || !pods[0].IdentityNotBefore.Equal(want.Add(-65*time.Minute)) {
		t.Errorf("exp-0 identity valid %s to %s, want 12:00 to %s", pods[0].IdentityNotBefore, pods[0].IdentityNotAfter, want)
	}
	if !pods[1].IdentityNotAfter.IsZero() {
		t.Errorf("exp-1's malformed record read as %s, want no date", pods[1].IdentityNotAfter)
	}
}
