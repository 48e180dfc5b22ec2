package karmada

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestRetry(t *testing.T) {
	ctx := context.Background()
	calls := 0
	fail := errors.New("not yet")
	if err := Retry(ctx, 0, func(context.Context) error { calls++; return fail }); !errors.Is(err, fail) || calls != 1 {
		t.Errorf("no wait: %v after %d calls, want the error after one", err, calls)
	}
	calls = 0
	if err := Retry(ctx, time.Minute, func(context.Context) error {
		calls++
		if calls < 2 {
			return fail
		}
		return nil
	}); err != nil || calls != 2 {
		t.Errorf("with a wait: %v after %d calls, want success on the second", err, calls)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := Retry(cctx, time.Minute, func(context.Context) error { return fail }); !errors.Is(err, fail) || !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v, want both the last error and the cancellation", err)
	}
}
