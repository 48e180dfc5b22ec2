//go:build tools

// Package tools pins the code generators `make generate` runs, in a module
// of their own so they do not bend the main module's dependencies.
package tools

import (
	_ "sigs.k8s.io/controller-tools/cmd/controller-gen"
)
