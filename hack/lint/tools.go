//go:build tools

// Package lint pins golangci-lint, which `make verify` builds and runs, in
// a module of its own: its many dependencies do not bend Trellis's or the
// code generators' (hack/tools).
package lint

import (
	_ "github.com/golangci/golangci-lint/v2/cmd/golangci-lint"
)
