package apfplan

import (
	"regexp"
	"slices"
	"testing"
)

func TestParseSchema(t *testing.T) {
	for _, tc := range []struct {
		name  string
		ns    string
		class Class
		ok    bool
	}{
		{"trellis-tenant-team-a.mutating", "team-a", Mutating, true},
		{"trellis-tenant-team-a.read", "team-a", Read, true},
		{"trellis-tenant-team-a.watch", "team-a", Watch, true},
		// A namespace ending in a class name keeps it: '.' sets the class off.
		{"trellis-tenant-team-read.watch", "team-read", Watch, true},
		{"trellis-tenant-a-watch.mutating", "a-watch", Mutating, true},
		// The single schema from before the split.
		{"trellis-tenant-team-a", "team-a", "", true},
		{"trellis-tenant-read", "read", "", true},
		{"trellis-tenant-team-a-reads", "team-a-reads", "", true},
		{"trellis-tenant-team-read", "team-read", "", true},
		{"trellis-tenant-team-a.other", "", "", false},
		{"trellis-tenants", "", "", false},
		{"trellis-tenant-", "", "", false},
		{"global-default", "", "", false},
	} {
		ns, c, ok := ParseSchema(tc.name)
		if ns != tc.ns || c != tc.class || ok != tc.ok {
			t.Errorf("ParseSchema(%q) = %q, %q, %v; want %q, %q, %v", tc.name, ns, c, ok, tc.ns, tc.class, tc.ok)
		}
		if tc.ok && tc.class != "" {
			if got := SchemaName(tc.ns, tc.class); got != tc.name {
				t.Errorf("SchemaName(%q, %q) = %q, want %q", tc.ns, tc.class, got, tc.name)
			}
		}
	}
}

// The PromQL regexps read names as ParseSchema does. Prometheus anchors
// label_replace's and =~'s regexps and uses Go's regexp.
func TestPromQLRegexpsAgreeWithParseSchema(t *testing.T) {
	tenant := regexp.MustCompile("^(?s:" + tenantRegexp() + ")$")
	class := regexp.MustCompile("^(?s:" + classRegexp() + ")$")
	for _, name := range []string{
		"trellis-tenant-team-a.mutating", "trellis-tenant-team-a.read", "trellis-tenant-team-a.watch",
		"trellis-tenant-team-read.watch", "trellis-tenant-a-watch.mutating", "trellis-tenant-team-a",
		"trellis-tenant-read", "trellis-tenant-team-a-reads", "trellis-tenant-team-read", "trellis-tenant-team-a.other",
		"trellis-tenants", "global-default",
	} {
		ns, c, ok := ParseSchema(name)
		m := tenant.FindStringSubmatch(name)
		switch {
		case ok && (m == nil || m[1] != ns):
			t.Errorf("%s: label_replace's tenant %q, ParseSchema's %q", name, m, ns)
		case !ok && m != nil:
			t.Errorf("%s: label_replace reads tenant %q of a name that is not a tenant's", name, m[1])
		}
		if got, want := class.MatchString(name), ok && c != ""; got != want {
			t.Errorf("%s: RequestsQuery matches %v, want %v", name, got, want)
		}
	}
}

func TestClassesCoverEveryVerbOnce(t *testing.T) {
	var all []string
	for _, c := range Classes {
		all = append(all, c.Verbs()...)
	}
	slices.Sort(all)
	want := []string{"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"}
	if !slices.Equal(all, want) {
		t.Errorf("the classes' verbs are %v, want each of %v once", all, want)
	}
}
