// Package layout holds tests of the repository's package structure: what
// may import what.
package layout
