package fleet

import (
	"bytes"
	"fmt"
	"strings"
	"text/template"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/trellis-dev/trellis/api/v1alpha1"
)

// How Karmada interprets each Trellis kind.
type kindInterpretation struct {
	Kind string
	// Replicas: spec.replicas is divided between members (revised per
	// member, retained when the member owns it), and the pod template's
	// requests are each replica's requirement. Kinds without it go whole
	// to every cluster the placement selects.
	Replicas bool
	// Templates are Lua expressions, on obj, of the kind's pod templates
	// (their dependencies: service accounts, ConfigMaps, Secrets).
	Templates []string
	// TemplateLoop, when set, is a Lua expression of a list whose items'
	// .template are pod templates (TrellisTrainingJob's replicaSpecs).
	TemplateLoop string
	// Sum are the status counters added up over members.
	Sum []string
	// Latest are the status timestamps whose latest member value is kept.
	Latest []string
	// Finite: a kind that runs to completion is healthy while it is not
	// Degraded; a serving kind is healthy when Ready.
	Finite bool
}

var interpretations = []kindInterpretation{
	{Kind: "TrellisService", Replicas: true, Templates: []string{"obj.spec.template"}, Sum: []string{"replicas", "readyReplicas", "updatedReplicas"}},
	{Kind: "TrellisStatefulSet", Replicas: true, Templates: []string{"obj.spec.template"}, Sum: []string{"replicas", "readyReplicas"}},
	{Kind: "TrellisDaemon", Templates: []string{"obj.spec.template"}, Sum: []string{"desiredNumberScheduled", "numberReady"}},
	{Kind: "TrellisCronJob", Templates: []string{"obj.spec.template"}, Sum: []string{"active"}, Latest: []string{"lastScheduleTime"}, Finite: true},
	{Kind: "TrellisJobSet", Templates: []string{"obj.spec.template"}, Sum: []string{"succeeded", "failed", "running"}, Finite: true},
	{Kind: "TrellisTrainingJob", TemplateLoop: "obj.spec.replicaSpecs", Sum: []string{"active", "succeeded", "failed"}, Finite: true},
}

// Kinds are the workload kinds the fleet interprets.
func Kinds() []string {
	out := make([]string, len(interpretations))
	for i, k := range interpretations {
		out[i] = k.Kind
	}
	return out
}

// DividesReplicas says whether the fleet divides kind's spec.replicas
// between members; a kind that does not runs whole in every member its
// placement selects.
func DividesReplicas(kind string) bool {
	for _, k := range interpretations {
		if k.Kind == kind {
			return k.Replicas
		}
	}
	return false
}

// RetainReplicasAnnotation on a fleet workload says its members own
// spec.replicas (a member's HorizontalPodAutoscaler scales it): Karmada
// keeps each member's value instead of its division. Karmada's own
// retain-replicas label (set by its hpaScaleTargetMarker) does the same.
const RetainReplicasAnnotation = "fleet.trellis.dev/member-owns-replicas"

// karmadaRetainReplicasLabel is Karmada's: resourcetemplate.karmada.io/retain-replicas.
const karmadaRetainReplicasLabel = "resourcetemplate.karmada.io/retain-replicas"

// InterpreterCustomizations renders one ResourceInterpreterCustomization
// per Trellis kind.
func InterpreterCustomizations() ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	for _, k := range interpretations {
		c := map[string]any{}
		add := func(name, tmpl string) error {
			script, err := lua(name, tmpl, k)
			if err != nil {
				return fmt.Errorf("%s %s: %w", k.Kind, name, err)
			}
			c[name] = map[string]any{"luaScript": script}
			return nil
		}
		steps := [][2]string{
			{"statusReflection", reflectLua},
			{"statusAggregation", aggregateLua},
			{"healthInterpretation", healthLua},
			{"dependencyInterpretation", dependenciesLua},
		}
		if k.Replicas {
			steps = append(steps, [][2]string{{"replicaResource", replicasLua}, {"replicaRevision", reviseLua}, {"retention", retainLua}}...)
		}
		for _, s := range steps {
			if err := add(s[0], s[1]); err != nil {
				return nil, err
			}
		}
		out = append(out, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "config.karmada.io/v1alpha1",
			"kind":       "ResourceInterpreterCustomization",
			"metadata": map[string]any{
				"name":   "trellis-" + strings.ToLower(k.Kind),
				"labels": map[string]any{ManagedByLabel: ManagedBy},
			},
			"spec": map[string]any{
				"target":         map[string]any{"apiVersion": v1alpha1.GroupVersion.String(), "kind": k.Kind},
				"customizations": c,
			},
		}})
	}
	return out, nil
}

// ManagedByLabel marks what the fleet bundle applies.
const (
	ManagedByLabel = "app.kubernetes.io/managed-by"
	ManagedBy      = "trellis-fleet"
)

func lua(name, text string, k kindInterpretation) (string, error) {
	t, err := template.New(name).Funcs(template.FuncMap{
		"retainLabel":      func() string { return karmadaRetainReplicasLabel },
		"retainAnnotation": func() string { return RetainReplicasAnnotation },
	}).Parse(text)
	if err != nil {
		return "", fmt.Errorf("parse the Lua template: %w", err)
	}
	var b bytes.Buffer
	if err := t.Execute(&b, k); err != nil {
		return "", fmt.Errorf("render the Lua template: %w", err)
	}
	return strings.TrimLeft(b.String(), "\n"), nil
}

// podTemplateLua turns a Trellis PodTemplate into the PodTemplateSpec
// Karmada's kube library reads.
const podTemplateLua = `
local function podTemplate(t)
  if t == nil then return {spec = {containers = {}}} end
  return {metadata = t.metadata, spec = {containers = t.containers, nodeSelector = t.nodeSelector,
    tolerations = t.tolerations, serviceAccountName = t.serviceAccountName, volumes = t.volumes}}
end
`

const replicasLua = `
local kube = require("kube")
` + podTemplateLua + `
function GetReplicas(obj)
  local replicas = 1
  if obj.spec.replicas ~= nil then replicas = obj.spec.replicas end
  return replicas, kube.accuratePodRequirements(podTemplate(obj.spec.template))
end
`

const reviseLua = `
function ReviseReplica(obj, desiredReplica)
  obj.spec.replicas = desiredReplica
  return obj
end
`

// retainLua keeps a member's spec.replicas only when the workload says its
// members own them: an unconditional keep would undo the division.
const retainLua = `
function Retain(desiredObj, observedObj)
  local m = desiredObj.metadata
  local owned = (m.labels ~= nil and m.labels["{{retainLabel}}"] == "true") or
    (m.annotations ~= nil and m.annotations["{{retainAnnotation}}"] == "true")
  if owned and observedObj.spec ~= nil and observedObj.spec.replicas ~= nil then
    desiredObj.spec.replicas = observedObj.spec.replicas
  end
  return desiredObj
end
`

// reflectLua collects what aggregation needs from a member's object: its
// status, and the generations that say whether the status is current.
const reflectLua = `
function ReflectStatus(observedObj)
  local s = observedObj.status
  if s == nil then return {} end
  local out = {observedGeneration = s.observedGeneration, conditions = s.conditions,
    runtimeProfile = s.runtimeProfile, generation = observedObj.metadata.generation}
{{- range .Sum}}
  out.{{.}} = s.{{.}}
{{- end}}
{{- range .Latest}}
  out.{{.}} = s.{{.}}
{{- end}}
  local a = observedObj.metadata.annotations
  if a ~= nil then out.templateGeneration = a["resourcetemplate.karmada.io/generation"] end
  return out
end
`

// aggregateLua adds up the members' counters and derives the fleet
// object's conditions: Ready when every member is, Degraded when one is
// (naming them), Progressing while one is or has not caught up with the
// template's generation.
const aggregateLua = `
local function condition(s, t)
  if s == nil or s.conditions == nil then return nil end
  for _, c in ipairs(s.conditions) do
    if c.type == t then return c end
  end
  return nil
end

local function setCondition(status, old, t, value, reason, message)
  local c = {type = t, status = value, reason = reason, message = message,
    lastTransitionTime = os.date("!%Y-%m-%dT%H:%M:%SZ")}
  local prev = condition(old, t)
  if prev ~= nil and prev.status == value and prev.lastTransitionTime ~= nil then
    c.lastTransitionTime = prev.lastTransitionTime
  end
  table.insert(status.conditions, c)
end

function AggregateStatus(desiredObj, statusItems)
  local old = desiredObj.status
  if old == nil then old = {} end
  local st = {conditions = {}}
  local generation = desiredObj.metadata.generation
  if statusItems == nil then statusItems = {} end
{{- range .Sum}}
  st.{{.}} = 0
{{- end}}
  local ready, current, progressing = 0, 0, false
  local degraded, waiting, profiles = {}, {}, {}
  for i = 1, #statusItems do
    local item = statusItems[i]
    local s = item.status
    if s == nil then s = {} end
{{- range .Sum}}
    if s.{{.}} ~= nil then st.{{.}} = st.{{.}} + s.{{.}} end
{{- end}}
{{- range .Latest}}
    if s.{{.}} ~= nil and (st.{{.}} == nil or s.{{.}} > st.{{.}}) then st.{{.}} = s.{{.}} end
{{- end}}
    local r = condition(s, "Ready")
    if r ~= nil and r.status == "True" then ready = ready + 1 else table.insert(waiting, item.clusterName) end
    local d = condition(s, "Degraded")
    if d ~= nil and d.status == "True" then table.insert(degraded, item.clusterName .. ": " .. (d.message or d.reason or "")) end
    local p = condition(s, "Progressing")
    if p ~= nil and p.status == "True" then progressing = true end
    if s.observedGeneration ~= nil and s.observedGeneration == s.generation and
       s.templateGeneration == tostring(generation) then
      current = current + 1
    end
    if s.runtimeProfile ~= nil then profiles[s.runtimeProfile] = true end
  end
  local n = #statusItems
  if n > 0 and current == n then st.observedGeneration = generation else st.observedGeneration = old.observedGeneration end
  local names = {}
  for p, _ in pairs(profiles) do table.insert(names, p) end
  table.sort(names)
  if #names > 0 then st.runtimeProfile = table.concat(names, ",") end
  if n > 0 and ready == n then
    setCondition(st, old, "Ready", "True", "Available", string.format("ready in %d of %d clusters", ready, n))
  else
    local msg = string.format("ready in %d of %d clusters", ready, n)
    if #waiting > 0 then msg = msg .. "; waiting for " .. table.concat(waiting, ", ") end
    setCondition(st, old, "Ready", "False", "NotReadyInClusters", msg)
  end
  if progressing or current < n then
    setCondition(st, old, "Progressing", "True", "RollingOut", string.format("%d of %d clusters at generation %d", current, n, generation))
  else
    setCondition(st, old, "Progressing", "False", "Available", string.format("%d clusters at generation %d", n, generation))
  end
  if #degraded > 0 then
    setCondition(st, old, "Degraded", "True", "DegradedInClusters", table.concat(degraded, "; "))
  else
    setCondition(st, old, "Degraded", "False", "AsExpected", "")
  end
  desiredObj.status = st
  return desiredObj
end
`

const healthLua = `
function InterpretHealth(observedObj)
  local s = observedObj.status
  if s == nil or s.conditions == nil then return false end
  for _, c in ipairs(s.conditions) do
{{- if .Finite}}
    if c.type == "Degraded" and c.status == "True" then return false end
{{- else}}
    if c.type == "Ready" then return c.status == "True" end
{{- end}}
  end
{{- if .Finite}}
  return true
{{- else}}
  return false
{{- end}}
end
`

// dependenciesLua names the pod templates' service accounts, ConfigMaps
// and Secrets, which Karmada then propagates with the workload when its
// policy propagates dependencies.
const dependenciesLua = `
local kube = require("kube")
` + podTemplateLua + `
function GetDependencies(obj)
  local refs, seen = {}, {}
  local function add(t)
    local deps = kube.getPodDependencies(podTemplate(t), obj.metadata.namespace)
    if deps == nil then return end
    for _, d in ipairs(deps) do
      local key = d.kind .. "/" .. d.name
      if not seen[key] then
        seen[key] = true
        table.insert(refs, d)
      end
    end
  end
{{- range .Templates}}
  add({{.}})
{{- end}}
{{- if .TemplateLoop}}
  if {{.TemplateLoop}} ~= nil then
    for _, r in ipairs({{.TemplateLoop}}) do add(r.template) end
  end
{{- end}}
  return refs
end
`
