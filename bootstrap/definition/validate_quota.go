package definition

import (
	"net/url"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// QuotaAddon is the addon that runs the quota watch.
const QuotaAddon = "trellis-quota"

func validateQuota(d *ClusterDefinition) field.ErrorList {
	var errs field.ErrorList
	q := d.Quota
	p := field.NewPath("quota")
	if q != (Quota{}) && !slices.ContainsFunc(d.Addons, func(a Addon) bool { return a.Name == QuotaAddon }) {
		errs = append(errs, field.Forbidden(p, "set, but the "+QuotaAddon+" addon that runs the watch is not in addons"))
	}
	if s := q.Schedule; s != "" && len(strings.Fields(s)) != 5 {
		errs = append(errs, field.Invalid(p.Child("schedule"), s, "must be a cron schedule of five fields, e.g. \"0 * * * *\""))
	}
	for name, v := range map[string]string{"prometheus": q.Prometheus, "webhook": q.Webhook} {
		if v == "" {
			continue
		}
		if u, err := url.Parse(v); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs = append(errs, field.Invalid(p.Child(name), v, "must be an http or https URL"))
		}
	}
	if tz := q.TimeZone; tz != "" {
		if _, err := time.LoadLocation(tz); err != nil {
			errs = append(errs, field.Invalid(p.Child("timeZone"), tz, err.Error()))
		}
	}
	if l := q.Lead; l != "" {
		if d, err := time.ParseDuration(l); err != nil || d <= 0 {
			errs = append(errs, field.Invalid(p.Child("lead"), l, "must be a positive duration such as 336h"))
		}
	}
	if th := q.Threshold; th < 0 || th > 1 {
		errs = append(errs, field.Invalid(p.Child("threshold"), th, "must be a fraction of a quota, above 0 and at most 1"))
	}
	return errs
}
