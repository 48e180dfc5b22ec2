// Package local brings up a local kind cluster wired like production from
// a cluster definition (cloud: kind): Up runs an ordered list of named
// steps (node image, cluster, instance-group labels, images, addons), as
// kind's cluster creation runs its actions. The CLI only turns flags into
// Options.
package local
