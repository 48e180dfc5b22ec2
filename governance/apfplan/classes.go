package apfplan

import (
	"slices"
	"strings"
)

// Class is a verb class: each tenant has a FlowSchema per class, so that
// the apiserver's metrics, which name a flow schema but never a namespace,
// give each tenant's requests by class.
type Class string

// The verb classes.
const (
	Mutating Class = "mutating"
	Read     Class = "read"
	Watch    Class = "watch"
)

// Classes are every class, in the order of a tenant's FlowSchemas.
var Classes = []Class{Mutating, Read, Watch}

var classVerbs = map[Class][]string{
	Mutating: {"create", "update", "patch", "delete", "deletecollection"},
	Read:     {"get"},
	Watch:    {"list", "watch"},
}

// Verbs are the request verbs of the class (RequestInfo's verbs, as APF
// matches them).
func (c Class) Verbs() []string { return append([]string(nil), classVerbs[c]...) }

// SchemaName is the name of a tenant's FlowSchema for the class:
// trellis-tenant-<ns>.<class>. A namespace holds no '.', so the name reads
// back one way only, and never as a schema from before the split
// (trellis-tenant-<ns>, all verbs), whatever the namespace's name.
func SchemaName(namespace string, c Class) string {
	return Prefix + namespace + "." + string(c)
}

// ParseSchema is the tenant and class of a Trellis tenant FlowSchema name.
// A name with the prefix and no class is a schema from before the split
// (one per tenant, all verbs): its class is "".
func ParseSchema(name string) (namespace string, c Class, ok bool) {
	rest, ok := strings.CutPrefix(name, Prefix)
	if !ok || rest == "" {
		return "", "", false
	}
	ns, class, split := strings.Cut(rest, ".")
	if !split {
		return rest, "", true
	}
	if ns == "" || !slices.Contains(Classes, Class(class)) {
		return "", "", false
	}
	return ns, Class(class), true
}

// tenantRegexp captures the tenant of a tenant FlowSchema name, split or
// not, in PromQL's label_replace (RE2, anchored), as ParseSchema reads it.
func tenantRegexp() string {
	return Prefix + "([^.]+)(?:[.](?:" + classAlternatives() + "))?"
}

// classRegexp matches the split schemas' names in PromQL.
func classRegexp() string {
	return Prefix + "[^.]+[.](?:" + classAlternatives() + ")"
}

func classAlternatives() string {
	alts := make([]string, len(Classes))
	for i, c := range Classes {
		alts[i] = string(c)
	}
	return strings.Join(alts, "|")
}
