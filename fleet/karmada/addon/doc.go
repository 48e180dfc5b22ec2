// Package addon is the fleet control plane's addon lifecycle (addons
// karmada-apiserver and karmada, run on a management cluster): the values
// their templates see, the PKI the applier seeds and renews, the check that
// the fleet's etcd membership does not change, and the quorum-aware roll of
// its members. It serves addons.Lifecycle, so the addon applier names no
// addon; it is a package of its own so that fleet/karmada (imported by the
// gateway and the fleet libraries) does not link the addon renderer and
// kops behind it.
package addon
