package console

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/trellis-dev/trellis/bootstrap/rollout"
	"github.com/trellis-dev/trellis/gateway"
)

// AccessReviewer asks the cluster's RBAC (SubjectAccessReview) whether an
// identity may do verb on resource of group in namespace ("" for cluster
// scoped); gateway.Authorizer is one. It returns an error wrapping
// gateway.ErrForbidden when RBAC refuses.
type AccessReviewer interface {
	AuthorizeGroup(ctx context.Context, id *gateway.Identity, namespace, group, resource, verb string) error
}

var _ AccessReviewer = (*gateway.Authorizer)(nil)

// RolloutStore is the AMI rollout's persisted state (ami-rollout.json in
// the kops state store) and the history of finished rollouts beside it;
// rollout.VFSStore is one. Request records a pause (StatusPaused), an
// abort (StatusAborting) or clears a pause (StatusRunning), as `trellis
// ami pause|abort` do.
type RolloutStore interface {
	Load(ctx context.Context) (*rollout.State, error)
	History(ctx context.Context) ([]rollout.Record, error)
	Request(ctx context.Context, status rollout.Status, now time.Time) (*rollout.State, error)
}

var _ RolloutStore = (*rollout.VFSStore)(nil)

// RBAC of the rollouts page: get to see it, update on the control
// subresource to pause, resume or abort. Cluster scoped; no such object
// needs to exist for a ClusterRole to grant it.
const (
	RolloutGroup    = "workloads.trellis.dev"
	RolloutResource = "amirollouts"
	RolloutControl  = "amirollouts/control"
)

// controls are the buttons: the action's name, the status it asks for,
// and what the confirmation page says it does.
var controls = map[string]struct {
	Status rollout.Status
	Says   string
}{
	"pause":  {rollout.StatusPaused, "The run stops after its current step (a drain in progress finishes or times out first). Nothing is rolled back."},
	"resume": {rollout.StatusRunning, "The pause is cleared. A run still holding the rollout carries on; if none does, run `trellis ami resume -f FILE` to continue it."},
	"abort":  {rollout.StatusAborting, "The run stops after its current step and the rollout ends; replaced nodes stay replaced. With no run holding it, it is aborted at once and `trellis ami rollout --rollback` may follow."},
}

// rolloutView is the rollouts page's data.
type rolloutView struct {
	State      *rollout.State
	Held       bool
	Groups     []groupRow
	CanControl bool
	Actions    []string
	// Confirm is the action the confirmation page asks about.
	Confirm, Says string
	// History are the finished rollouts, newest first; HistoryError why
	// they could not be read (the current rollout is still shown).
	History      []historyRow
	HistoryError string
	// Version is rolloutVersion of what the page shows, for its live
	// update; empty on the confirmation page (it is not updated live).
	Version string
}

type historyRow struct {
	rollout.Record
	Took time.Duration
}

type groupRow struct {
	Name             string
	Phase            int
	Replaced, Total  int
	Step, Blocked    string
	Started, Updated time.Time
}

// allowed asks RBAC as the session's identity; a refusal renders the
// error page (403 with the reason, none of the data) and returns false.
func (c *Console) allowed(w http.ResponseWriter, r *http.Request, s *Session, p page, resource, verb string) bool {
	err := errors.New("the console has no access reviewer configured")
	if c.cfg.Access != nil {
		err = c.cfg.Access.AuthorizeGroup(r.Context(), s.identity(), "", RolloutGroup, resource, verb)
	}
	if err == nil {
		return true
	}
	p.Title, p.Message = "Forbidden", fmt.Sprintf("%s may not %s %s (group %s, cluster scoped): ask for a ClusterRole that grants it", s.User, verb, resource, RolloutGroup)
	code := http.StatusForbidden
	if !errors.Is(err, gateway.ErrForbidden) {
		p.Title, p.Message, code = "Error", err.Error(), http.StatusBadGateway
	}
	c.render(w, code, "error", p)
	return false
}

// canControl reports whether the session may pause, resume or abort.
func (c *Console) canControl(r *http.Request, s *Session) bool {
	return c.cfg.Access != nil && c.cfg.Access.AuthorizeGroup(r.Context(), s.identity(), "", RolloutGroup, RolloutControl, "update") == nil
}

// rollouts shows the AMI rollout the store holds, to whoever RBAC lets get
// amirollouts; the buttons only to whoever may update amirollouts/control.
func (c *Console) rollouts(w http.ResponseWriter, r *http.Request, s *Session) {
	p := page{Session: s, Title: "Rollouts", Nav: "rollouts"}
	if !c.allowed(w, r, s, p, RolloutResource, "get") {
		return
	}
	v, code := c.rolloutView(r, s, &p)
	p.Data = v
	c.render(w, code, "rollouts", p)
}

func (c *Console) rolloutView(r *http.Request, s *Session, p *page) (rolloutView, int) {
	v := rolloutView{}
	if c.cfg.Rollouts == nil {
		p.Message = "no rollout state store is configured (--rollout-state-store and --rollout-cluster)"
		return v, http.StatusOK
	}
	st, err := c.cfg.Rollouts.Load(r.Context())
	if err != nil {
		p.Message = err.Error()
		return v, http.StatusBadGateway
	}
	hist, err := c.cfg.Rollouts.History(r.Context())
	if err != nil {
		v.HistoryError = err.Error()
	}
	v.Version = rolloutVersion(st, hist)
	for _, rec := range hist {
		row := historyRow{Record: rec}
		if !rec.Started.IsZero() && rec.Finished.After(rec.Started) {
			row.Took = rec.Finished.Sub(rec.Started).Round(time.Second)
		}
		v.History = append(v.History, row)
	}
	if st == nil {
		return v, http.StatusOK
	}
	now := c.cfg.Clock.Now()
	v.State, v.Held = st, st.Held(now)
	for _, name := range st.GroupNames() {
		g := st.Groups[name]
		row := groupRow{Name: name, Phase: g.Strategy.Phase, Replaced: len(g.Replaced), Total: len(g.Old), Blocked: g.Blocked, Started: g.Started, Step: "pending"}
		switch {
		case g.Done:
			row.Step = "done"
		case g.Batch != nil:
			row.Step = fmt.Sprintf("batch %d: %s (%d of %d drained)", g.Batch.N, g.Batch.Step, len(g.Batch.Drained), len(g.Batch.Old))
		}
		v.Groups = append(v.Groups, row)
	}
	if v.CanControl = c.canControl(r, s); v.CanControl {
		switch st.Status {
		case rollout.StatusRunning:
			v.Actions = []string{"pause", "abort"}
		case rollout.StatusPaused:
			v.Actions = []string{"resume", "abort"}
		case rollout.StatusAborting, rollout.StatusFailed:
			v.Actions = []string{"abort"}
		}
	}
	return v, http.StatusOK
}

// confirm is the first POST of a button: it asks for confirmation, to
// whoever RBAC still lets control the rollout.
func (c *Console) confirm(w http.ResponseWriter, r *http.Request, s *Session) {
	c.control(w, r, s, false)
}

// act is the second POST: it re-checks RBAC and records the request.
func (c *Console) act(w http.ResponseWriter, r *http.Request, s *Session) {
	c.control(w, r, s, true)
}

func (c *Console) control(w http.ResponseWriter, r *http.Request, s *Session, do bool) {
	p := page{Session: s, Title: "Rollouts", Nav: "rollouts"}
	action := r.PostFormValue("action")
	ctl, ok := controls[action]
	if !ok {
		p.Message = "unknown rollout action " + fmt.Sprintf("%q", action) + ": pause, resume or abort"
		c.render(w, http.StatusBadRequest, "error", p)
		return
	}
	// Never trust the hidden button: ask RBAC again on every POST.
	if !c.allowed(w, r, s, p, RolloutControl, "update") {
		return
	}
	if c.cfg.Rollouts == nil {
		p.Message = "no rollout state store is configured"
		c.render(w, http.StatusServiceUnavailable, "error", p)
		return
	}
	if !do {
		p.Title = "Confirm: " + action + " the rollout"
		v, code := c.rolloutView(r, s, &p)
		v.Confirm, v.Says, v.Version = action, ctl.Says, ""
		p.Data = v
		c.render(w, code, "rollouts", p)
		return
	}
	if _, err := c.cfg.Rollouts.Request(r.Context(), ctl.Status, c.cfg.Clock.Now()); err != nil {
		p.Message = fmt.Sprintf("failed to %s the rollout: %v", action, err)
		code := http.StatusConflict
		if !errors.Is(err, rollout.ErrNoRollout) && !errors.Is(err, rollout.ErrNotPaused) {
			code = http.StatusBadGateway
		}
		c.render(w, code, "error", p)
		return
	}
	http.Redirect(w, r, c.cfg.BasePath+"/rollouts", http.StatusSeeOther)
}
