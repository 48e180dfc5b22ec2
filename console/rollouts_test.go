package console_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/trellis-dev/trellis/bootstrap/rollout"
	"github.com/trellis-dev/trellis/console"
	"github.com/trellis-dev/trellis/gateway"
	"github.com/trellis-dev/trellis/internal/testutil/cluster"
	"github.com/trellis-dev/trellis/internal/testutil/golden"
)

type wallClock struct{}

func (wallClock) Now() time.Time { return time.Now() }

// rolloutState is a rollout in progress: the canary group done, the node
// group's second batch draining and held by a PodDisruptionBudget, a run
// holding the lock.
func rolloutState() *rollout.State {
	return &rollout.State{
		ID: "r1764330000", Cluster: "dev.example.com", Image: "ami-0123456789abcdef0", Status: rollout.StatusRunning, Budget: 2,
		Lock:    rollout.Lock{Owner: "ops-1/4242", Expires: now.Add(4 * time.Minute)},
		Updated: now.Add(-30 * time.Second),
		Groups: map[string]*rollout.GroupProgress{
			"control-plane": {Name: "control-plane", Strategy: rollout.Strategy{MaxSurge: 1}, Old: []string{"i-c1"}, Replaced: []string{"i-c1"}, Done: true},
			"nodes": {Name: "nodes", Strategy: rollout.Strategy{MaxSurge: 2, Canary: true, Phase: 1}, Old: []string{"i-1", "i-2", "i-3", "i-4", "i-5"}, Replaced: []string{"i-1"},
				Batch:   &rollout.Batch{N: 2, Old: []string{"i-2", "i-3"}, Desired: 7, Step: rollout.StepDrain, Drained: []string{"i-2"}},
				Blocked: "team-a/web-pdb (for 2m0s)"},
		},
	}
}

// pastRollouts are two finished rollouts, recorded oldest first: an
// upgrade's relaunch aborted by a request, then an AMI rollout done.
func pastRollouts() []rollout.Record {
	t0 := time.Unix(1763000000, 0)
	t1 := time.Unix(1763900000, 0)
	return []rollout.Record{
		{ID: "r1763000000", Cluster: "dev.example.com", Reason: "upgrade to v1.36.1", Groups: []string{"nodes"}, Replaced: 2, Total: 5,
			Started: t0, Finished: t0.Add(20 * time.Minute), Outcome: rollout.StatusAborted, Run: "abort request (last run ops-2/77)"},
		{ID: "r1763900000", Cluster: "dev.example.com", From: "ami-0aaaaaaaaaaaaaaa0", To: "ami-0bbbbbbbbbbbbbbb0", Groups: []string{"control-plane", "nodes"},
			Replaced: 6, Total: 6, Started: t1, Finished: t1.Add(50 * time.Minute), Outcome: rollout.StatusDone, Run: "ops-1/4242"},
	}
}

// TestIntegrationRollouts runs the rollouts page on a real apiserver's
// RBAC: carol may get amirollouts, dave may also update
// amirollouts/control, bob may do neither.
func TestIntegrationRollouts(t *testing.T) {
	cp := cluster.Start(t, cluster.Options{})
	ctx := context.Background()
	kc := cp.Client
	role := func(name string, rules ...rbacv1.PolicyRule) {
		_, err := kc.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}, metav1.CreateOptions{})
		must(t, err)
		_, err = kc.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: name},
			Subjects: []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "User", Name: "oidc:" + name + "@example.com"}},
		}, metav1.CreateOptions{})
		must(t, err)
	}
	view := rbacv1.PolicyRule{APIGroups: []string{console.RolloutGroup}, Resources: []string{console.RolloutResource}, Verbs: []string{"get"}}
	role("carol", view)
	role("dave", view, rbacv1.PolicyRule{APIGroups: []string{console.RolloutGroup}, Resources: []string{console.RolloutControl}, Verbs: []string{"update"}})

	store, err := rollout.NewVFSStore("file://"+t.TempDir(), "dev.example.com")
	must(t, err)
	must(t, store.Save(ctx, rolloutState()))
	for _, rec := range pastRollouts() {
		must(t, store.Record(ctx, rec))
	}
	stored := func() string {
		st, err := store.Load(ctx)
		must(t, err)
		b, _ := json.Marshal(st)
		return string(b)
	}
	reads := &countingStore{VFSStore: store}
	c, err := console.New(console.Config{API: &fakeAPI{}, SessionKey: []byte(strings.Repeat("k", 32)), Clock: fixedClock{now},
		Access:   gateway.NewAuthorizer(kc.AuthorizationV1().SubjectAccessReviews(), wallClock{}, 0, 0, 100),
		Rollouts: reads, RolloutPoll: 50 * time.Millisecond})
	must(t, err)
	bob, bobTok := signIn(t, c, "oidc:bob@example.com")
	carol, carolTok := signIn(t, c, "oidc:carol@example.com")
	dave, daveTok := signIn(t, c, "oidc:dave@example.com")
	goldenPage := func(name, tok string, r reply) {
		t.Helper()
		if r.Header.Get("Content-Security-Policy") != console.CSP || regexp.MustCompile(`<script(?:\s[^>]*)?>[^<]|<script>|\son[a-z]+=|\sstyle=`).MatchString(r.Body) || len(r.Body) > 200<<10 {
			t.Errorf("%s: want the strict CSP, no inline script or style, under 200 kB", name)
		}
		golden.Assert(t, "testdata/"+name+".golden.html", []byte(regexp.MustCompile(regexp.QuoteMeta(tok)).ReplaceAllString(r.Body, "CSRF-TOKEN")))
	}

	t.Run("refused user sees the refusal, not the rollout", func(t *testing.T) {
		r := do(c, http.MethodGet, "/rollouts", bob, nil)
		if r.StatusCode != http.StatusForbidden || strings.Contains(r.Body, "r1764330000") || !strings.Contains(r.Body, "may not get amirollouts") {
			t.Fatalf("bob: %d, want 403 with the reason and no rollout:\n%s", r.StatusCode, r.Body)
		}
		for _, leak := range []string{"r1763900000", "r1763000000", "ami-0aaaaaaaaaaaaaaa0", `id="history"`} {
			if strings.Contains(r.Body, leak) {
				t.Fatalf("bob's refusal shows the history (%s):\n%s", leak, r.Body)
			}
		}
		goldenPage("rollouts-refused", bobTok, r)
	})
	t.Run("viewer without control sees no buttons", func(t *testing.T) {
		r := do(c, http.MethodGet, "/rollouts", carol, nil)
		for _, want := range []string{"r1764330000", "Running", "1/5", "batch 2: Drain (1 of 2 drained)", "team-a/web-pdb"} {
			if r.StatusCode != http.StatusOK || !strings.Contains(r.Body, want) {
				t.Fatalf("carol: %d, want 200 with %q:\n%s", r.StatusCode, want, r.Body)
			}
		}
		history := regexp.MustCompile(`(?s)<table id="history">.*?</table>`).FindString(r.Body)
		for _, want := range []string{
			"<caption>Finished rollouts, newest first",
			`<tr id="h-r1763900000"><td>r1763900000</td><td>Done</td><td>ami-0aaaaaaaaaaaaaaa0 &rarr; ami-0bbbbbbbbbbbbbbb0</td><td>control-plane, nodes</td><td>6/6</td><td>2025-11-23 12:13Z</td><td>2025-11-23 13:03Z (took 50m0s)</td><td>ops-1/4242</td></tr>`,
			`<tr id="h-r1763000000"><td>r1763000000</td><td>Aborted</td><td>upgrade to v1.36.1</td><td>nodes</td><td>2/5</td>`,
		} {
			if !strings.Contains(history, want) {
				t.Fatalf("carol: the history table lacks %s:\n%s", want, history)
			}
		}
		if strings.Index(r.Body, `id="history"`) < strings.Index(r.Body, `id="groups"`) {
			t.Errorf("the history comes before the current rollout")
		}
		if strings.Contains(r.Body, "/rollouts/confirm") || strings.Contains(r.Body, `id="controls"`) {
			t.Fatalf("carol may not control the rollout but sees its buttons:\n%s", r.Body)
		}
		goldenPage("rollouts", carolTok, r)
	})
	t.Run("controller sees buttons", func(t *testing.T) {
		r := do(c, http.MethodGet, "/rollouts", dave, nil)
		for _, want := range []string{`value="pause"`, `value="abort"`} {
			if !strings.Contains(r.Body, want) {
				t.Fatalf("dave: want the %s button:\n%s", want, r.Body)
			}
		}
	})
	t.Run("POST without the control permission is refused", func(t *testing.T) {
		before := stored()
		for _, path := range []string{"/rollouts/confirm", "/rollouts/control"} {
			r := do(c, http.MethodPost, path, carol, url.Values{"csrf": {carolTok}, "action": {"pause"}})
			if r.StatusCode != http.StatusForbidden || !strings.Contains(r.Body, "may not update amirollouts/control") {
				t.Errorf("carol %s: %d, want 403:\n%s", path, r.StatusCode, r.Body)
			}
		}
		if after := stored(); after != before {
			t.Fatalf("a refused pause changed the store:\n%s\nwas\n%s", after, before)
		}
	})
	t.Run("POST without CSRF token is refused", func(t *testing.T) {
		before := stored()
		for _, form := range []url.Values{{"action": {"pause"}}, {"action": {"pause"}, "csrf": {carolTok}}} {
			if r := do(c, http.MethodPost, "/rollouts/control", dave, form); r.StatusCode != http.StatusForbidden || !strings.Contains(r.Body, "CSRF") {
				t.Errorf("dave with csrf %q: %d, want 403 naming CSRF", form.Get("csrf"), r.StatusCode)
			}
		}
		if after := stored(); after != before {
			t.Fatalf("a form without the token changed the store")
		}
	})
	t.Run("corrupt history still shows the rollout", func(t *testing.T) {
		path := store.HistoryPath.Path()
		good, err := os.ReadFile(path)
		must(t, err)
		must(t, os.WriteFile(path, []byte(`{"rollouts": [`), 0o600))
		defer func() { must(t, os.WriteFile(path, good, 0o600)) }()
		r := do(c, http.MethodGet, "/rollouts", carol, nil)
		if r.StatusCode != http.StatusOK || !strings.Contains(r.Body, `id="history-error"`) || !strings.Contains(r.Body, "corrupt rollout history "+path) ||
			!strings.Contains(r.Body, "r1764330000") || strings.Contains(r.Body, `id="history"`) {
			t.Fatalf("carol with a corrupt history: %d, want 200 with the rollout and the error naming %s:\n%s", r.StatusCode, path, r.Body)
		}
	})
	t.Run("pause then resume", func(t *testing.T) {
		r := do(c, http.MethodPost, "/rollouts/confirm", dave, url.Values{"csrf": {daveTok}, "action": {"pause"}})
		if r.StatusCode != http.StatusOK || !strings.Contains(r.Body, `action="/rollouts/control"`) || !strings.Contains(r.Body, "Yes, pause") {
			t.Fatalf("confirm: %d, want a confirmation form:\n%s", r.StatusCode, r.Body)
		}
		if st, _ := store.Load(ctx); st.Status != rollout.StatusRunning {
			t.Fatalf("the confirmation page changed the status to %s", st.Status)
		}
		r = do(c, http.MethodPost, "/rollouts/control", dave, url.Values{"csrf": {daveTok}, "action": {"pause"}})
		if st, _ := store.Load(ctx); r.StatusCode != http.StatusSeeOther || st.Status != rollout.StatusPaused {
			t.Fatalf("pause: %d, status %s, want 303 and Paused:\n%s", r.StatusCode, st.Status, r.Body)
		}
		r = do(c, http.MethodGet, "/rollouts", dave, nil)
		if !strings.Contains(r.Body, `value="resume"`) || strings.Contains(r.Body, `value="pause"`) {
			t.Fatalf("paused: want resume and no pause button:\n%s", r.Body)
		}
		goldenPage("rollouts-paused", daveTok, r)
		r = do(c, http.MethodPost, "/rollouts/control", dave, url.Values{"csrf": {daveTok}, "action": {"resume"}})
		if st, _ := store.Load(ctx); r.StatusCode != http.StatusSeeOther || st.Status != rollout.StatusRunning || st.Message != "pause cleared" {
			t.Fatalf("resume: %d, status %s %q, want 303 and Running, pause cleared", r.StatusCode, st.Status, st.Message)
		}
		r = do(c, http.MethodPost, "/rollouts/control", dave, url.Values{"csrf": {daveTok}, "action": {"resume"}})
		if r.StatusCode != http.StatusConflict || !strings.Contains(r.Body, "not paused") {
			t.Fatalf("resume of a running rollout: %d, want 409:\n%s", r.StatusCode, r.Body)
		}
	})
	t.Run("live updates", func(t *testing.T) {
		testRolloutsLive(t, c, store, reads, carol, bob)
	})
}
