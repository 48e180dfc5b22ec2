// Package versions holds the versions Trellis pins (Kubernetes, etcd,
// CoreDNS, kops, kwok and the supported Kubernetes minors). They come from
// versions.env, which the Makefile and hack/*.sh read too, so a version is
// changed in that file and nowhere else.
package versions

import (
	_ "embed"
	"fmt"
	"maps"
	"math"
	"regexp"
	"strconv"
	"strings"

	"github.com/blang/semver/v4"
)

//go:embed versions.env
var env string

// The pinned versions, as versions.env spells them (v-prefixed).
var (
	// Kubernetes is the release `make tools` builds: the integration tests'
	// control plane and the local clusters' nodes run it.
	Kubernetes = mustGet("K8S_VERSION")
	// Etcd is the etcd release built beside it.
	Etcd = mustGet("ETCD_VERSION")
	// CoreDNS is the release of the local node images' cluster DNS.
	CoreDNS = mustGet("COREDNS_VERSION")
	// Kops is the k8s.io/kops module and CLI release.
	Kops = mustGet("KOPS_VERSION")
	// Kwok is the release of `make bench-scale`'s simulated nodes.
	Kwok = mustGet("KWOK_VERSION")
	// Karmada is the release of the fleet's control plane.
	Karmada = mustGet("KARMADA_VERSION")
)

// MinKubernetes and MaxKubernetes bound the Kubernetes versions a cluster
// definition may ask for: the first patch of the oldest supported minor and
// the last of the newest.
var MinKubernetes, MaxKubernetes = mustMinors(mustGet("K8S_MIN_SUPPORTED"), mustGet("K8S_MAX_SUPPORTED"))

var keyRE = regexp.MustCompile(`^[A-Z][A-Z0-9_]*$`)

// Parse reads KEY=VALUE lines; blank lines and lines starting with # are
// skipped. Keys are upper case, values have no spaces or quotes, and a key
// appears once.
func Parse(s string) (map[string]string, error) {
	out := map[string]string{}
	for i, line := range strings.Split(s, "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		switch {
		case !ok || !keyRE.MatchString(k):
			return nil, fmt.Errorf("line %d: %q is not KEY=VALUE", i+1, line)
		case v == "" || strings.ContainsAny(v, " \t\r\"'$#"):
			return nil, fmt.Errorf("line %d: the value of %s, %q, is empty or has a space, quote, $ or #", i+1, k, v)
		case out[k] != "":
			return nil, fmt.Errorf("line %d: %s is set twice", i+1, k)
		}
		out[k] = v
	}
	return out, nil
}

// All returns every KEY=VALUE of versions.env.
func All() map[string]string {
	return maps.Clone(all)
}

var all = mustParse(env)

func mustParse(s string) map[string]string {
	m, err := Parse(s)
	if err != nil {
		panic(fmt.Sprintf("versions.env: %v", err))
	}
	return m
}

// Minors returns the range of Kubernetes versions from minor min to minor
// max, both included ("1.34", "1.36"): min's first patch and max's last.
func Minors(min, max string) (first, last semver.Version, err error) {
	first, err = parseMinor(min)
	if err != nil {
		return first, last, err
	}
	last, err = parseMinor(max)
	if err != nil {
		return first, last, err
	}
	last.Patch = math.MaxUint64
	if first.GT(last) {
		return first, last, fmt.Errorf("minor %s is newer than %s", min, max)
	}
	return first, last, nil
}

func parseMinor(s string) (semver.Version, error) {
	major, minor, ok := strings.Cut(s, ".")
	ma, err1 := strconv.ParseUint(major, 10, 64)
	mi, err2 := strconv.ParseUint(minor, 10, 64)
	if !ok || err1 != nil || err2 != nil {
		return semver.Version{}, fmt.Errorf("%q is not a minor version such as 1.36", s)
	}
	return semver.Version{Major: ma, Minor: mi}, nil
}

func mustGet(key string) string {
	v, ok := all[key]
	if !ok {
		panic(fmt.Sprintf("versions.env has no %s", key))
	}
	return v
}

func mustMinors(min, max string) (semver.Version, semver.Version) {
	first, last, err := Minors(min, max)
	if err != nil {
		panic(fmt.Sprintf("versions.env: K8S_MIN_SUPPORTED, K8S_MAX_SUPPORTED: %v", err))
	}
	return first, last
}
