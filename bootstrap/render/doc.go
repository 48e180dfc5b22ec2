// Package render turns a Trellis cluster definition into kops Cluster and
// InstanceGroup objects (the real k8s.io/kops API types), runs kops's own
// validation on them, and serialises them the way `kops get -o yaml` does.
package render
