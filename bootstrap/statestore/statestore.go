// Package statestore opens a kops state store (s3://, file:// or memfs://)
// through kops's own vfs clientset, and keeps Trellis's own files beside a
// cluster's there: its pod-identity root CA.
package statestore

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"k8s.io/kops/pkg/client/simple"
	"k8s.io/kops/pkg/client/simple/vfsclientset"
	"k8s.io/kops/util/pkg/vfs"
)

// ErrNoStateStore is returned when no state store URL was given.
var ErrNoStateStore = errors.New("no state store: pass --state or set KOPS_STATE_STORE")

// Open returns a kops clientset for a state store URL. s3:// uses the AWS
// SDK's default credential chain and honours S3_ENDPOINT (and S3_REGION,
// S3_ACCESS_KEY_ID, S3_SECRET_ACCESS_KEY) for S3-compatible stores.
func Open(ctx context.Context, url string) (simple.Clientset, error) {
	if url == "" {
		return nil, ErrNoStateStore
	}
	switch {
	case strings.HasPrefix(url, "s3://"), strings.HasPrefix(url, "file://"), strings.HasPrefix(url, "memfs://"):
	default:
		return nil, fmt.Errorf("unsupported state store %q: use s3://, file:// or memfs://", url)
	}
	base, err := vfs.Context.BuildVfsPath(url)
	if err != nil {
		return nil, fmt.Errorf("failed to open state store %s: %w", url, err)
	}
	return vfsclientset.NewVFSClientset(vfs.Context, base), nil
}
