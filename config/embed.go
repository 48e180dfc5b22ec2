// Package config embeds the generated CRDs so the addon bundle ships the
// same files `make generate` writes.
package config

import "embed"

// CRDs holds crd/*.yaml.
//
//go:embed crd/*.yaml
var CRDs embed.FS
