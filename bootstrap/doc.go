// Package bootstrap is the cluster-lifecycle library behind `trellis cluster`:
// it renders definitions to kops specs, stores them in a kops state store,
// and plans or applies them through kops as a library.
package bootstrap
