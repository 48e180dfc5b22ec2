package apfplan

import (
	"maps"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/trellis-dev/trellis/api/wellknown"
)

// Precedence of the per-tenant FlowSchemas: after the platform's own
// (trellis-system, 850) and before the shared tenants schema (8500).
const Precedence = 8400

// Objects are what applying the proposal writes: the priority levels with
// new shares, and a FlowSchema per tenant namespace and verb class, all
// three pointing at the tenant's level.
// The shared level's queuing is the addon's; a dedicated level serves one
// namespace, one flow, so it has one queue, and it does not borrow: a
// tenant past its forecast waits in its own queue.
// On the shared level, only the shares and the queues are written (as a
// partial object for server-side apply): the rest stays the addon's.
func (p Proposal) Objects() (levels []any, schemas []*flowcontrolv1.FlowSchema) {
	for _, l := range p.Levels {
		if l.Name == TenantsLevel {
			limited := map[string]any{"nominalConcurrencyShares": l.Shares}
			if l.Queues > 0 {
				// Written on every apply, raised or not: server-side apply
				// drops a field its one owner stops sending, and the
				// apiserver's default (64) would take the place of a raise
				// applied before.
				limited["limitResponse"] = map[string]any{"type": "Queue", "queuing": map[string]any{"queues": l.Queues}}
			}
			levels = append(levels, map[string]any{
				"apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "PriorityLevelConfiguration",
				"metadata": map[string]any{"name": l.Name},
				"spec":     map[string]any{"type": "Limited", "limited": limited},
			})
		}
		pl := &flowcontrolv1.PriorityLevelConfiguration{
			TypeMeta:   metav1.TypeMeta{APIVersion: "flowcontrol.apiserver.k8s.io/v1", Kind: "PriorityLevelConfiguration"},
			ObjectMeta: metav1.ObjectMeta{Name: l.Name, Labels: maps.Clone(ManagedBy)},
			Spec: flowcontrolv1.PriorityLevelConfigurationSpec{Type: flowcontrolv1.PriorityLevelEnablementLimited, Limited: &flowcontrolv1.LimitedPriorityLevelConfiguration{
				NominalConcurrencyShares: new(l.Shares),
			}},
		}
		if l.Name != TenantsLevel {
			pl.Spec.Limited.LendablePercent = new(int32(50))
			pl.Spec.Limited.BorrowingLimitPercent = new(int32(0))
			pl.Spec.Limited.LimitResponse = flowcontrolv1.LimitResponse{Type: flowcontrolv1.LimitResponseTypeQueue, Queuing: &flowcontrolv1.QueuingConfiguration{
				Queues: 1, HandSize: 1, QueueLengthLimit: 500,
			}}
			levels = append(levels, pl)
		}
		for _, ns := range l.Tenants {
			for _, c := range Classes {
				schemas = append(schemas, tenantSchema(ns, c, l.Name))
			}
		}
	}
	return levels, schemas
}

// ManagedBy labels the objects a proposal writes: Apply deletes the
// FlowSchemas so labelled that a proposal no longer holds.
var ManagedBy = map[string]string{wellknown.LabelManagedBy: "trellis-quota"}

// tenantSchema is the tenant's FlowSchema for the class: the class's verbs
// on any namespaced resource in its namespace (a tenant's cluster-scoped
// and non-resource requests are the shared schema's).
func tenantSchema(ns string, c Class, level string) *flowcontrolv1.FlowSchema {
	return &flowcontrolv1.FlowSchema{
		TypeMeta:   metav1.TypeMeta{APIVersion: "flowcontrol.apiserver.k8s.io/v1", Kind: "FlowSchema"},
		ObjectMeta: metav1.ObjectMeta{Name: SchemaName(ns, c), Labels: maps.Clone(ManagedBy)},
		Spec: flowcontrolv1.FlowSchemaSpec{
			PriorityLevelConfiguration: flowcontrolv1.PriorityLevelConfigurationReference{Name: level},
			MatchingPrecedence:         Precedence,
			DistinguisherMethod:        &flowcontrolv1.FlowDistinguisherMethod{Type: flowcontrolv1.FlowDistinguisherMethodByNamespaceType},
			Rules: []flowcontrolv1.PolicyRulesWithSubjects{{
				Subjects: []flowcontrolv1.Subject{
					{Kind: flowcontrolv1.SubjectKindGroup, Group: &flowcontrolv1.GroupSubject{Name: "system:serviceaccounts"}},
					{Kind: flowcontrolv1.SubjectKindGroup, Group: &flowcontrolv1.GroupSubject{Name: "system:authenticated"}},
				},
				ResourceRules: []flowcontrolv1.ResourcePolicyRule{{Verbs: c.Verbs(), APIGroups: []string{"*"}, Resources: []string{"*"}, Namespaces: []string{ns}}},
			}},
		},
	}
}
