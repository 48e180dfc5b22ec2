// Package awsemutest starts the AWS API emulator for a test. A missing
// emulator fails the test (CI installs it; hack/test-deps.sh --aws says
// how): an AWS test that skips could never fail.
package awsemutest

import (
	"context"
	"testing"
	"time"

	"github.com/trellis-dev/trellis/internal/awsemu"
)

// Start runs an emulator for the test and stops it when the test ends.
func Start(t testing.TB) *awsemu.Server {
	t.Helper()
	return StartWith(t, awsemu.Options{})
}

// StartWith is Start with options (e.g. the emulator's environment).
func StartWith(t testing.TB, o awsemu.Options) *awsemu.Server {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	s, err := awsemu.Start(ctx, o)
	if err != nil {
		t.Fatalf("AWS API emulator: %v (hack/test-deps.sh --aws checks for it)", err)
	}
	t.Cleanup(s.Stop)
	return s
}

// Proxy puts a fault proxy in front of s for the test.
func Proxy(t testing.TB, s *awsemu.Server) *awsemu.FaultProxy {
	t.Helper()
	p, err := awsemu.NewFaultProxy(s.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}
