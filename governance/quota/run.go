package quota

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/trellis-dev/trellis/governance/apfplan"
	"github.com/trellis-dev/trellis/governance/forecast"
	"github.com/trellis-dev/trellis/governance/forecast/report"
)

// ForecastWindow is the least history a forecast reads (its model looks
// at the last eight weeks).
const ForecastWindow = 56 * 24 * time.Hour

// PlanOptions are what `trellis quota plan` is given.
type PlanOptions struct {
	Source Source
	// Retention is the history read: the peak over it, or (with Forecast)
	// at least ForecastWindow of it.
	Retention time.Duration
	// Skip are namespaces without quotas.
	Skip []string
	// Headroom over the peak (with Forecast: for namespaces with too
	// little history).
	Headroom float64
	// PromStep is the resolution of the peak read from Prometheus.
	PromStep time.Duration
	// UseForecast plans a daily schedule from each namespace's forecast,
	// with Forecast's horizon and risk.
	UseForecast bool
	Forecast    forecast.Options
	// API (with UseForecast and a Prometheus source) also proposes API
	// capacity from the tenants' forecast seats and the cluster's, read
	// through Client.
	API    bool
	Client func() (kubernetes.Interface, error)
}

// RunPlan makes a plan (see PlanOptions) at now and writes it to out as
// YAML; the API proposal's summary goes to errw.
func RunPlan(ctx context.Context, opts PlanOptions, now time.Time, out, errw io.Writer) error {
	var p Plan
	skip := map[string]bool{}
	for _, n := range opts.Skip {
		skip[n] = true
	}
	if opts.UseForecast {
		if err := opts.Forecast.Validate(); err != nil {
			return fmt.Errorf("--risk or --horizon: %w", err)
		}
		h, err := opts.Source.History(ctx, max(opts.Retention, ForecastWindow), now)
		if err != nil {
			return err
		}
		if p, err = MakeForecastPlan(h, now, opts.Forecast, opts.Headroom, skip); err != nil {
			return err
		}
		if opts.API {
			if p.API, err = proposeAPI(ctx, opts, now, slices.Collect(maps.Keys(p.Quotas))); err != nil {
				return err
			}
			// The plan (out) holds it all; this is its summary.
			fmt.Fprint(errw, p.API)
		}
	} else {
		smp, err := peakSamples(ctx, opts, now)
		if err != nil {
			return err
		}
		p = MakePlan(smp, opts.Headroom, skip)
	}
	b, err := yaml.Marshal(p)
	if err != nil {
		return fmt.Errorf("failed to encode the quota plan: %w", err)
	}
	if _, err := out.Write(b); err != nil {
		return fmt.Errorf("failed to write the quota plan: %w", err)
	}
	return nil
}

func peakSamples(ctx context.Context, opts PlanOptions, now time.Time) ([]Sample, error) {
	src := opts.Source
	if src.Prometheus != "" {
		// The peak over the same retention, from kube-state-metrics.
		smp, err := FromPrometheus(ctx, src.Prometheus, opts.Retention, opts.PromStep, now)
		if err == nil && len(smp) == 0 {
			err = fmt.Errorf("prometheus %s has no kube-state-metrics series for any namespace", src.Prometheus)
		}
		return smp, err
	}
	smp, err := (Store{Path: src.Store, Retention: opts.Retention}).Load(now)
	if err == nil && len(smp) == 0 {
		err = fmt.Errorf("%s holds no samples: run `trellis quota sample` first", src.Store)
	}
	return smp, err
}

// proposeAPI forecasts the tenants' seats and request rates by verb class
// from Prometheus and sizes the cluster's priority levels for the seats. A
// planned namespace without history yet (no FlowSchemas of its own so far)
// is a tenant of the shared level: its FlowSchemas start the history.
func proposeAPI(ctx context.Context, opts PlanOptions, now time.Time, namespaces []string) (*apfplan.Proposal, error) {
	if opts.Source.Prometheus == "" {
		return nil, fmt.Errorf("--api reads the tenants' seats from --prometheus")
	}
	h, err := apfplan.HistoryFromPrometheus(ctx, opts.Source.Prometheus, ForecastWindow, now)
	if err != nil {
		return nil, err
	}
	demands, err := apfplan.Demands(h, now, opts.Forecast, opts.Headroom)
	if err != nil {
		return nil, err
	}
	for _, ns := range namespaces {
		if _, ok := h[ns]; !ok {
			demands = append(demands, apfplan.Demand{Namespace: ns})
		}
	}
	c, err := opts.Client()
	if err != nil {
		return nil, err
	}
	capacity, err := apfplan.CapacityOf(ctx, c)
	if err != nil {
		return nil, err
	}
	p := apfplan.Propose(capacity, demands, apfplan.Options{Headroom: opts.Headroom})
	return &p, nil
}

// ReadPlan reads a plan (RunPlan's output), refusing unknown fields.
func ReadPlan(path string) (Plan, error) {
	var p Plan
	b, err := os.ReadFile(path)
	if err != nil {
		return p, fmt.Errorf("failed to read quota plan %s: %w", path, err)
	}
	if err := yaml.UnmarshalStrict(b, &p); err != nil {
		return p, fmt.Errorf("%s: %w", path, err)
	}
	return p, nil
}

// FederateFiles reads per-member plans, each given as MEMBER=FILE (MEMBER
// a fleet member's name, at least two members), federates the namespaces
// planned in at least minMembers of them, and returns the
// FederatedResourceQuotas, with a line per namespace on w.
func FederateFiles(specs []string, minMembers int, w io.Writer) ([]*unstructured.Unstructured, error) {
	byMember := map[string]Plan{}
	for _, p := range specs {
		member, file, ok := strings.Cut(p, "=")
		if !ok || len(validation.IsDNS1123Label(member)) > 0 {
			return nil, fmt.Errorf("--plan %q: want MEMBER=FILE, MEMBER a fleet member's name", p)
		}
		if _, dup := byMember[member]; dup {
			return nil, fmt.Errorf("--plan: member %s given twice", member)
		}
		plan, err := ReadPlan(file)
		if err != nil {
			return nil, err
		}
		byMember[member] = plan
	}
	if len(byMember) < 2 {
		return nil, fmt.Errorf("give at least two --plan MEMBER=FILE: a federated quota spans clusters")
	}
	var objs []*unstructured.Unstructured
	for _, f := range Federate(byMember, minMembers) {
		objs = append(objs, f.Object())
		fmt.Fprintln(w, f.String())
	}
	return objs, nil
}

// ReportOptions are what `trellis quota report` is given.
type ReportOptions struct {
	Source Source
	// Retention is the history read (at least ForecastWindow of it).
	Retention time.Duration
	// Namespace and Resource name the series drawn.
	Namespace, Resource string
	// Out is the PNG, SVG or JSON file to write.
	Out string
	// Plan, if set, is a plan file whose quota (a schedule's steps) is
	// drawn.
	Plan     string
	Forecast forecast.Options
}

// RunReport draws a namespace's usage, its forecast band and its quota at
// now into opts.Out, and tells out where it went (not for JSON).
func RunReport(ctx context.Context, opts ReportOptions, now time.Time, out io.Writer) error {
	ns, res := opts.Namespace, opts.Resource
	h, err := opts.Source.History(ctx, max(opts.Retention, ForecastWindow), now)
	if err != nil {
		return err
	}
	series, ok := h[ns][corev1.ResourceName(res)]
	if !ok {
		return fmt.Errorf("no history of %s in namespace %s", res, ns)
	}
	var steps []forecast.Step
	if opts.Plan != "" {
		p, err := ReadPlan(opts.Plan)
		if err != nil {
			return err
		}
		steps = quotaSteps(p, ns, corev1.ResourceName(res), series.Start)
	}
	m, err := forecast.Fit(series, opts.Forecast)
	if err != nil && !forecast.IsShortHistory(err) {
		return fmt.Errorf("%s %s: %w", ns, res, err)
	}
	r := report.New(ns, res, now, series, m, steps)
	if err != nil {
		r.Note = "no forecast: " + err.Error()
	}
	if filepath.Ext(opts.Out) == ".json" {
		b, err := json.MarshalIndent(r, "", "  ")
		if err != nil {
			return fmt.Errorf("failed to encode the forecast report of %s %s: %w", ns, res, err)
		}

		return os.WriteFile(opts.Out, append(b, '\n'), 0o644)
	}
	if err := r.Save(opts.Out); err != nil {
		return err
	}
	fmt.Fprintf(out, "wrote %s\n", opts.Out)
	return nil
}

// quotaSteps is a plan's quota of one resource in one namespace over time.
// A peak plan's one quota is drawn from the history's start.
func quotaSteps(p Plan, ns string, r corev1.ResourceName, start time.Time) []forecast.Step {
	var out []forecast.Step
	for _, st := range p.Schedules[ns] {
		if q, ok := st.Hard[r]; ok {
			out = append(out, forecast.Step{From: st.From, Value: q.AsApproximateFloat64()})
		}
	}
	if len(out) == 0 {
		if q, ok := p.Quotas[ns][r]; ok {
			out = append(out, forecast.Step{From: start, Value: q.AsApproximateFloat64()})
		}
	}
	return out
}

// WatchOptions are what `trellis quota watch` is given.
type WatchOptions struct {
	// Config is the check; its Hours and History are filled from TZ and
	// Source.
	Config WatchConfig
	// TZ is the time zone of business hours.
	TZ string
	// Forecasts turns on forecast alerts, from Source's history.
	Forecasts bool
	Source    Source
	// Client reaches the cluster.
	Client func() (kubernetes.Interface, error)
}

// RunWatch runs one Watch at now and writes what it applied, found and
// sent to out.
func RunWatch(ctx context.Context, opts WatchOptions, now time.Time, out io.Writer) error {
	cfg := opts.Config
	loc, err := time.LoadLocation(opts.TZ)
	if err != nil {
		return fmt.Errorf("--tz: %w", err)
	}
	cfg.Hours = BusinessHours(loc)
	if opts.Forecasts {
		if cfg.History, err = opts.Source.History(ctx, ForecastWindow, now); err != nil {
			return err
		}
	}
	c, err := opts.Client()
	if err != nil {
		return err
	}
	res, err := Watch(ctx, c, cfg, now)
	for _, ns := range res.Applied {
		fmt.Fprintf(out, "%s: applied the quota schedule's step for %s\n", ns, now.UTC().Format(time.DateOnly))
	}
	for _, a := range res.Alerts {
		fmt.Fprintf(out, "%s: %s at %.0f%% (%s of %s)\n", a.Namespace, a.Resource, a.Percent, a.Used, a.Hard)
	}
	for _, a := range res.Forecasts {
		fmt.Fprintf(out, "%s: %s forecast to reach its quota %s on %s (in %.1f days)\n", a.Namespace, a.Resource, a.Hard, a.Crosses.UTC().Format(time.DateOnly), a.Days)
	}
	switch {
	case err != nil:
		return err
	case len(res.Alerts)+len(res.Forecasts) > 0 && !res.Sent && cfg.Webhook != "":
		fmt.Fprintln(out, "outside business hours: not sent")
	case res.Sent:
		fmt.Fprintln(out, "alert sent")
	}
	return nil
}
