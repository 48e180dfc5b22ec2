//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/trellis-dev/trellis/addons"
	"github.com/trellis-dev/trellis/api/v1alpha1"
	"github.com/trellis-dev/trellis/bootstrap/rollout"
	trellislocal "github.com/trellis-dev/trellis/local"
)

// TestConsoleBrowser uses the local cluster's web console as a person
// would, in Debian's chromium driven by chromedp: sign in at the local
// OIDC provider with the user `trellis local up` printed, submit a workload
// that is refused (its image is not pinned) and read the reason with its
// field, fix it and submit it, see it become Ready on the workloads page
// without a reload, open its page, and be refused as the guest user RBAC
// allows nothing. Screenshots go to $TRELLIS_TEST_ARTIFACTS/console-e2e
// (else a temporary folder it prints).
func TestConsoleBrowser(t *testing.T) {
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatalf("chromium is not installed (hack/test-deps.sh installs it): %v", err)
	}
	ctx := context.Background()
	s, err := cs.CoreV1().Secrets("trellis-system").Get(ctx, trellislocal.ConsoleSecret, metav1.GetOptions{})
	must(t, err)
	base := strings.TrimSuffix(string(s.Data["redirect-url"]), "callback")
	dir := filepath.Dir(gatewayContext())
	password := func(who string) string {
		b, err := os.ReadFile(filepath.Join(dir, "trellis-local-console-"+who+".password"))
		must(t, err)
		return strings.TrimSpace(string(b))
	}
	out := os.Getenv("TRELLIS_TEST_ARTIFACTS")
	if out == "" {
		out = t.TempDir()
	}
	out = filepath.Join(out, "console-e2e")
	must(t, os.MkdirAll(out, 0o755))
	t.Logf("screenshots in %s", out)

	allowRegistry(t, "docker.io/trellis")
	const ns, name = trellislocal.SampleNamespace, "console-e2e"
	remove := func() {
		_ = cl.Delete(context.Background(), &v1alpha1.TrellisService{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}})
	}
	remove()
	t.Cleanup(remove)

	actx, stop := chromedp.NewExecAllocator(ctx, append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium), chromedp.NoSandbox, chromedp.WindowSize(1100, 1000),
		// The gateway serves its pod identity, issued for its Service's
		// name, not for the node address the browser opens.
		chromedp.Flag("ignore-certificate-errors", true),
	)...)
	defer stop()
	bctx, stop := chromedp.NewContext(actx)
	defer stop()
	if err := chromedp.Do(bctx); err != nil { // starts the browser
		t.Fatalf("failed to start %s: %v", chromium, err)
	}
	bctx, stop = context.WithTimeout(bctx, 5*time.Minute)
	defer stop()
	b := &page{t: t, ctx: bctx, out: out}

	// Sign in as the dev user; the workloads page of its namespace.
	b.signIn(base+"workloads?namespace="+ns, trellislocal.ConsoleUser, password("dev"))
	b.shot("workloads")

	// A refused dry run names the field and the reason.
	unpinned, err := yaml.Marshal(submittable(ns, name, "docker.io/trellis/hello:0.1.0"))
	must(t, err)
	b.run(20*time.Second, chromedp.Navigate(base+"submit"), chromedp.WaitVisible(chromedp.ID("workload")),
		chromedp.SetValue(chromedp.ID("workload"), string(unpinned)),
		chromedp.Click(chromedp.CSS(`button[value="dry-run"]`)), chromedp.WaitVisible(chromedp.ID("problems")))
	if got := b.text(`#problems`); !strings.Contains(got, "spec.template.containers[0].image") || !strings.Contains(got, "not pinned by digest") {
		t.Errorf("the refusal does not name the image field and the missing digest:\n%s", got)
	}
	b.shot("submit-refused")

	// Pinned by the digest the nodes hold, it is submitted.
	pinned, err := yaml.Marshal(submittable(ns, name, helloByDigest(t)))
	must(t, err)
	b.run(20*time.Second, chromedp.SetValue(chromedp.ID("workload"), string(pinned)),
		chromedp.Click(chromedp.CSS(`button[value="submit"]`)), chromedp.WaitVisible(chromedp.ID("result")))
	if got := b.text(`#result`); !strings.Contains(got, ns+"/"+name+" created") {
		t.Fatalf("submission result %q, want %s/%s created", got, ns, name)
	}
	b.shot("submit-created")

	// The workloads page turns it Ready by itself.
	row := fmt.Sprintf(`tr[id$="-%s"]`, name)
	b.run(20*time.Second, chromedp.Navigate(base+"workloads?namespace="+ns), chromedp.WaitVisible(chromedp.CSS(row)))
	if _, err := chromedp.Run(bctx, chromedp.Evaluate[bool](`window.notReloaded = true`)); err != nil {
		t.Fatalf("mark the page: %v", err)
	}
	b.run(3*time.Minute, chromedp.WaitVisible(chromedp.CSS(row+` td.ready-True`)))
	if v, err := chromedp.Run(bctx, chromedp.Evaluate[bool](`window.notReloaded === true`)); err != nil || !v {
		t.Errorf("the page was reloaded to show Ready (%v)", err)
	}
	b.shot("workloads-ready")

	// Its page lists its pods.
	b.run(20*time.Second, chromedp.Click(chromedp.CSS(row+` a`)), chromedp.WaitVisible(chromedp.ID("pods")))
	// The pod's identity certificate expiry, which the issuer records on
	// the pod, may take a moment after Ready (the sidecar's first CSR).
	got := b.text(`#pods`)
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(got, "expires in ") && time.Now().Before(deadline); got = b.text(`#pods`) {
		time.Sleep(2 * time.Second)
		b.run(20*time.Second, chromedp.Reload(), chromedp.WaitVisible(chromedp.ID("pods")))
	}
	if !strings.Contains(got, name+"-") || !strings.Contains(got, "expires in ") {
		t.Errorf("the workload page lists no pod of %s with its identity's expiry:\n%s", name, got)
	}
	detail, _ := chromedp.Run(bctx, chromedp.Location())
	b.shot("workload")

	// The capacity page: the namespace's quota, its usage as the
	// trellis-quota-sample CronJob records it on the control-plane node,
	// and the forecast's plot.
	quotaName := "console-e2e"
	_ = cs.CoreV1().ResourceQuotas(ns).Delete(ctx, quotaName, metav1.DeleteOptions{})
	_, err = cs.CoreV1().ResourceQuotas(ns).Create(ctx, &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: quotaName},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("100")}}}, metav1.CreateOptions{})
	must(t, err)
	t.Cleanup(func() {
		_ = cs.CoreV1().ResourceQuotas(ns).Delete(context.Background(), quotaName, metav1.DeleteOptions{})
	})
	runCronJob(t, "trellis-quota-sample", fmt.Sprint(time.Now().Unix()))
	b.run(30*time.Second, chromedp.Navigate(base+"capacity?namespace="+ns), chromedp.WaitVisible(chromedp.CSS(`figure.plot img`)))
	plotWidth, err := chromedp.Run(bctx, chromedp.Poll[int](`document.querySelector("figure.plot img").naturalWidth || null`, chromedp.WithPollingTimeout(20*time.Second)))
	if err != nil || plotWidth == 0 {
		t.Errorf("the capacity plot did not load (%v)", err)
	}
	if got := b.text(`main`); !strings.Contains(got, quotaName) || !strings.Contains(got, "pods") {
		t.Errorf("the capacity page lacks the quota %s and its pods:\n%s", quotaName, got)
	}
	b.shot("capacity")

	// A paused AMI rollout in the rollout state store on the control-plane
	// node (kind has no AMIs: the state is what `trellis ami pause` leaves,
	// written with the same store): the dev user resumes it after
	// confirming, and the store says Running.
	rollouts := pausedRollout(t)
	b.run(30*time.Second, chromedp.Navigate(base+"rollouts"), chromedp.WaitVisible(chromedp.ID("groups")))
	b.waitText(`#status`, "Paused", 20*time.Second)
	if got := b.liveText(`#groups`); !strings.Contains(got, "nodes") || !strings.Contains(got, "2/5") {
		t.Errorf("the rollout's groups lack nodes 2/5:\n%s", got)
	}
	b.shot("rollouts")
	b.run(20*time.Second, chromedp.Click(chromedp.CSS(`button[value="resume"]`)), chromedp.WaitVisible(chromedp.ID("confirm")))
	b.shot("rollouts-confirm")
	b.run(20*time.Second, chromedp.Click(chromedp.CSS(`#confirm button`)), chromedp.WaitVisible(chromedp.ID("controls")))
	eventually(t, "the store says Running after resume", 20*time.Second, func() (bool, string) {
		st := rollouts.status(t)
		return st == rollout.StatusRunning, string(st)
	})
	b.waitText(`#status`, "Running", 20*time.Second)
	b.shot("rollouts-resumed")

	// The guest signs in and is refused what RBAC does not allow it.
	b.run(20*time.Second, chromedp.Click(chromedp.CSS(`form.signout button`)), chromedp.WaitVisible(chromedp.ID("signin")))
	b.signIn(base+"workloads?namespace="+ns, trellislocal.ConsoleGuest, password("guest"))
	if got := b.text(`main`); !strings.Contains(got, "may not") || strings.Contains(got, name) {
		t.Errorf("the guest's workloads page: %q, want a refusal and no workload", got)
	}
	b.run(20*time.Second, chromedp.Navigate(detail), chromedp.WaitVisible(chromedp.CSS(`main`)))
	if got := b.text(`main`); !strings.Contains(got, "may not") || strings.Contains(got, name+"-") {
		t.Errorf("the guest's page of %s: %q, want a refusal and no pod", name, got)
	}
	b.shot("refused")
	b.run(20*time.Second, chromedp.Navigate(base+"capacity?namespace="+ns), chromedp.WaitVisible(chromedp.CSS(`main`)))
	if got := b.text(`main`); !strings.Contains(got, "may not") || strings.Contains(got, quotaName) {
		t.Errorf("the guest's capacity page: %q, want a refusal and no quota", got)
	}
	b.run(20*time.Second, chromedp.Navigate(base+"rollouts"), chromedp.WaitVisible(chromedp.CSS(`main`)))
	if got := b.text(`main`); !strings.Contains(got, "may not get amirollouts") || strings.Contains(got, rolloutID) {
		t.Errorf("the guest's rollouts page: %q, want a refusal and no rollout", got)
	}
	if v, err := chromedp.Run(bctx, chromedp.Evaluate[bool](`document.querySelector('button[value="resume"], button[value="pause"], button[value="abort"]') !== null`)); err != nil || v {
		t.Errorf("the guest sees a rollout button (%v)", err)
	}
	b.shot("rollouts-refused")
}

// rolloutID names the paused rollout pausedRollout leaves.
const rolloutID = "r1764330000"

// nodeRollouts is the rollout state store the local cluster's gateway
// reads (addons.KindConsoleDataDir on the control-plane node), reached
// through docker.
type nodeRollouts struct {
	node, dir string // the node's store folder
	cluster   string
}

// pausedRollout leaves a paused rollout in the local cluster's store, as
// `trellis ami pause` leaves one once its run has stopped: the control
// plane done, the nodes group 2 of 5 replaced. Its cleanup removes it.
func pausedRollout(t *testing.T) *nodeRollouts {
	t.Helper()
	// The gateway's --rollout-cluster is the definition's name.
	r := &nodeRollouts{node: cluster + "-control-plane", dir: addons.KindConsoleDataDir + "/state", cluster: cluster}
	local := t.TempDir()
	store, err := rollout.NewVFSStore("file://"+local, r.cluster)
	must(t, err)
	now := time.Now()
	must(t, store.Save(context.Background(), &rollout.State{
		ID: rolloutID, Cluster: r.cluster, Image: "ami-0123456789abcdef0", Status: rollout.StatusPaused, Budget: 2,
		Message: "paused after the canary", Updated: now.Add(-time.Minute), Started: now.Add(-20 * time.Minute),
		Groups: map[string]*rollout.GroupProgress{
			"control-plane": {Name: "control-plane", Strategy: rollout.Strategy{MaxSurge: 1}, Old: []string{"i-c1"}, Replaced: []string{"i-c1"}, Done: true},
			"nodes": {Name: "nodes", Strategy: rollout.Strategy{MaxSurge: 2, Canary: true, Phase: 1},
				Old: []string{"i-1", "i-2", "i-3", "i-4", "i-5"}, Replaced: []string{"i-1", "i-2"}},
		},
	}))
	remove := func() {
		_ = exec.Command("docker", "exec", r.node, "rm", "-rf", r.dir+"/"+r.cluster).Run()
	}
	remove()
	t.Cleanup(remove)
	if out, err := exec.Command("docker", "exec", r.node, "mkdir", "-p", r.dir).CombinedOutput(); err != nil {
		t.Fatalf("make the store folder on %s: %v\n%s", r.node, err, out)
	}
	if out, err := exec.Command("docker", "cp", filepath.Join(local, r.cluster), r.node+":"+r.dir+"/").CombinedOutput(); err != nil {
		t.Fatalf("copy the rollout state onto %s: %v\n%s", r.node, err, out)
	}
	return r
}

// status is the rollout's status in the node's store.
func (r *nodeRollouts) status(t *testing.T) rollout.Status {
	t.Helper()
	out, err := exec.Command("docker", "exec", r.node, "cat", r.dir+"/"+r.cluster+"/trellis/ami-rollout.json").Output()
	must(t, err)
	var st rollout.State
	must(t, json.Unmarshal(out, &st))
	return st.Status
}

// helloByDigest is the sample image by the manifest digest the nodes hold
// it under (local up names every loaded image so, as a registry pull
// would).
func helloByDigest(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("docker", "exec", "trellis-local-control-plane", "ctr", "--namespace=k8s.io", "images", "ls", "-q").Output()
	must(t, err)
	for _, l := range strings.Fields(string(out)) {
		if strings.HasPrefix(l, "docker.io/trellis/hello@sha256:") {
			return l
		}
	}
	t.Fatalf("the control-plane node holds no docker.io/trellis/hello@sha256:… name:\n%s", out)
	return ""
}

// page drives one browser tab.
type page struct {
	t   *testing.T
	ctx context.Context
	out string
}

func (b *page) run(timeout time.Duration, steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, timeout)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		loc, _ := chromedp.Run(b.ctx, chromedp.Location())
		b.shot("failure")
		b.t.Fatalf("browser at %s: %v", loc, err)
	}
}

// liveText is the text of sel as the page holds it now, read by a query
// in the page (the live updates replace the rollouts page's nodes, so a
// node id taken before can be gone when it is read).
func (b *page) liveText(sel string) string {
	b.t.Helper()
	q, err := json.Marshal(sel)
	must(b.t, err)
	s, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](`(e => e ? (e.innerText || e.textContent || "").trim() : "")(document.querySelector(`+string(q)+`))`))
	if err != nil {
		b.t.Fatalf("read %s: %v", sel, err)
	}
	return s
}

// waitText waits until sel's text holds want.
func (b *page) waitText(sel, want string, timeout time.Duration) {
	b.t.Helper()
	got := ""
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if got = b.liveText(sel); strings.Contains(got, want) {
			return
		}
	}
	b.shot("failure")
	b.t.Errorf("%s says %q after %s, want %q", sel, got, timeout, want)
}

func (b *page) text(sel string) string {
	b.t.Helper()
	s, err := chromedp.Run(b.ctx, chromedp.Text(chromedp.CSS(sel)))
	if err != nil {
		b.t.Fatalf("read %s: %v", sel, err)
	}
	return s
}

// signIn opens target, is sent to the local provider, and signs in.
// waitAt waits until the browser has loaded url (a poll: evaluating
// during a navigation can fail, and the next asks the new document).
func (b *page) waitAt(url string, timeout time.Duration) {
	b.t.Helper()
	at := fmt.Sprintf(`location.href === new URL(%q).href && document.readyState === "complete"`, url)
	var err error
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		var ok bool
		if ok, err = chromedp.Run(b.ctx, chromedp.Evaluate[bool](at)); err == nil && ok {
			return
		}
	}
	loc, _ := chromedp.Run(b.ctx, chromedp.Location())
	b.shot("failure")
	b.t.Fatalf("browser at %s, not at %s (loaded) within %s: last error %v", loc, url, timeout, err)
}

func (b *page) signIn(target, user, password string) {
	b.t.Helper()
	b.run(30*time.Second, chromedp.Navigate(target), chromedp.WaitVisible(chromedp.ID("username")),
		chromedp.SendKeys(chromedp.ID("username"), strings.SplitN(user, "@", 2)[0]), chromedp.SendKeys(chromedp.ID("password"), password),
		chromedp.Submit(chromedp.ID("password")))
	// The "Signed in" page has the .who of the page it refreshes to: a
	// node found there is gone after the refresh ("No node with given id
	// found"). Its destination first, then the queries.
	b.waitAt(target, 30*time.Second)
	b.run(30*time.Second, chromedp.WaitVisible(chromedp.CSS(`.who`)))
	if got := b.text(`.who`); got != "oidc:"+user {
		b.t.Fatalf("signed in as %q, want oidc:%s", got, user)
	}
}

func (b *page) shot(name string) {
	png, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(100))
	if err == nil {
		err = os.WriteFile(filepath.Join(b.out, name+".png"), png, 0o644)
	}
	if err != nil {
		b.t.Logf("screenshot %s: %v", name, err)
	}
}
