package gateway

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/trellis-dev/trellis/gateway/api"
)

var digestRE = regexp.MustCompile(`@sha256:[0-9a-f]{64}$`)

// checkProvenance refuses every image that is not pinned by digest or not
// from a registry the policy allows, naming each image's field.
func checkProvenance(raw map[string]any, p *Policy) []api.Problem {
	var probs []api.Problem
	for _, img := range images(raw) {
		if !digestRE.MatchString(img.ref) {
			probs = append(probs, api.Problem{Check: "provenance", Field: img.field + ".image",
				Message: fmt.Sprintf("image %q is not pinned by digest: use <image>@sha256:<digest>", img.ref)})
		}
		if reg := registryOf(img.ref); !allowed(img.ref, p.Registries) {
			msg := fmt.Sprintf("image %q is from registry %s, which is not allowed", img.ref, reg)
			if len(p.Registries) == 0 {
				msg += ": the platform allows none yet (ConfigMap " + PolicyConfigMap + ", key " + PolicyKeyRegistries + ")"
			} else {
				msg += fmt.Sprintf(" (allowed: %s)", strings.Join(p.Registries, ", "))
			}
			probs = append(probs, api.Problem{Check: "provenance", Field: img.field + ".image", Message: msg})
		}
	}
	return probs
}

// registryOf is the registry host of an image reference (docker.io when
// the first component is not a host).
func registryOf(ref string) string {
	first, _, ok := strings.Cut(ref, "/")
	if !ok || (!strings.ContainsAny(first, ".:") && first != "localhost") {
		return "docker.io"
	}
	return first
}

// allowed: the reference's registry (and path) starts with an entry.
func allowed(ref string, registries []string) bool {
	name := ref
	if i := strings.IndexAny(name, "@"); i >= 0 {
		name = name[:i]
	}
	if registryOf(ref) == "docker.io" && !strings.HasPrefix(name, "docker.io/") {
		if !strings.Contains(name, "/") {
			name = "library/" + name // nginx is docker.io/library/nginx
		}
		name = "docker.io/" + name
	}
	for _, r := range registries {
		if name == r || strings.HasPrefix(name, r+"/") {
			return true
		}
	}
	return false
}

// imageRef is a container's path (field), name and image.
type imageRef struct{ field, name, ref string }

// images finds every container image under spec with its field path:
// whatever the kind, pod templates hold containers lists.
func images(raw map[string]any) []imageRef {
	var out []imageRef
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch t := v.(type) {
		case map[string]any:
			for _, k := range sortedKeys(t) {
				p := path + "." + k
				if k == "containers" || k == "initContainers" {
					if list, ok := t[k].([]any); ok {
						for i, c := range list {
							if m, ok := c.(map[string]any); ok {
								img, _ := m["image"].(string)
								name, _ := m["name"].(string)
								out = append(out, imageRef{field: fmt.Sprintf("%s[%d]", p, i), name: name, ref: img})
							}
						}
						continue
					}
				}
				walk(p, t[k])
			}
		case []any:
			for i, e := range t {
				walk(fmt.Sprintf("%s[%d]", path, i), e)
			}
		}
	}
	walk("spec", raw["spec"])
	return out
}

// containerField is the path of the container called name, for messages
// that name a container but no field (the webhook's).
func containerField(raw map[string]any, name string) string {
	for _, img := range images(raw) {
		if img.name == name {
			return img.field
		}
	}
	return "spec"
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
