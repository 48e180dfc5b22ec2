// Package nodepods is how a node daemon watches the pods of its node: one
// list and watch that the apiserver filters by spec.nodeName, so a daemon
// on every node never lists the cluster's pods and its cache holds only its
// own node's.
package nodepods
