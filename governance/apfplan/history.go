package apfplan

import (
	"context"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"

	"github.com/trellis-dev/trellis/governance/forecast"
	"github.com/trellis-dev/trellis/governance/forecast/promhist"
)

// SeatsQuery is each tenant's seats at one instant: those its requests
// hold and those waiting in its queues, summed over its flow schemas (one
// per class, or the single one from before the split) into a tenant label.
var SeatsQuery = `sum by (tenant) (label_replace({__name__=~"apiserver_flowcontrol_current_executing_seats|apiserver_flowcontrol_current_inqueue_requests", flow_schema=~"` +
	Prefix + `.+"}, "tenant", "$1", "flow_schema", "` + tenantRegexp() + `"))`

// RequestsQuery is each tenant class's request rate (per second, over 5
// minutes) at one instant, by flow schema: the requests APF dispatched,
// summed over the apiservers.
var RequestsQuery = `sum by (flow_schema) (rate(apiserver_flowcontrol_dispatched_requests_total{flow_schema=~"` + classRegexp() + `"}[5m]))`

// TenantHistory is one tenant namespace's hourly peaks.
type TenantHistory struct {
	// Seats are its seats, all classes together: the peak of the sum.
	Seats forecast.Series
	// Requests are its requests per second, by class.
	Requests map[Class]forecast.Series
}

// History is each tenant namespace's hourly peaks.
type History map[string]TenantHistory

// HistoryFromPrometheus reads the window before now: the hourly peak of
// SeatsQuery and of RequestsQuery (at one-minute resolution), by tenant.
func HistoryFromPrometheus(ctx context.Context, url string, window time.Duration, now time.Time) (History, error) {
	c, err := api.NewClient(api.Config{Address: url})
	if err != nil {
		return nil, fmt.Errorf("prometheus %s: %w", url, err)
	}
	end := now.UTC().Truncate(time.Hour)
	start := end.Add(-window)
	papi := promv1.NewAPI(c)
	read := func(what, query string) (model.Matrix, error) {
		m, err := promhist.Query(ctx, papi, query, time.Minute, start, end)
		if err != nil {
			return nil, fmt.Errorf("prometheus %s: %s: %w", url, what, err)
		}
		return m, nil
	}
	seats, err := read("tenant seats", SeatsQuery)
	if err != nil {
		return nil, err
	}
	requests, err := read("tenant requests", RequestsQuery)
	if err != nil {
		return nil, err
	}
	return historyOf(seats, requests, start, end), nil
}

// historyOf maps the two queries' hourly series (stamped a second before
// each hour's end) onto tenants: seats by their tenant label, requests by
// their flow schema's tenant and class. Every tenant gets a seats series,
// empty hours NaN, so that it can be fitted.
func historyOf(seats, requests model.Matrix, start, end time.Time) History {
	h := History{}
	for _, s := range seats {
		ns := string(s.Metric["tenant"])
		if ns == "" {
			continue
		}
		th := h[ns]
		th.Seats = promhist.Series(s, start, end)
		h[ns] = th
	}
	for _, s := range requests {
		ns, c, ok := ParseSchema(string(s.Metric["flow_schema"]))
		if !ok || c == "" {
			continue
		}
		th := h[ns]
		if th.Requests == nil {
			th.Requests = map[Class]forecast.Series{}
		}
		th.Requests[c] = promhist.Series(s, start, end)
		h[ns] = th
	}
	for ns, th := range h {
		if th.Seats.Step == 0 {
			th.Seats = forecast.Resample(nil, start, end, time.Hour)
			h[ns] = th
		}
	}
	return h
}
