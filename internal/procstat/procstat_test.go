package procstat

import (
	"os"
	"testing"
	"time"
)

func TestSelf(t *testing.T) {
	before, err := CPUTime(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	// Busy-loop until the clock (10ms ticks) shows 50ms more: on a loaded
	// machine that takes longer than 50ms of wall time, but not 10s.
	deadline := time.Now().Add(10 * time.Second)
	for {
		for start := time.Now(); time.Since(start) < 10*time.Millisecond; {
		}
		after, err := CPUTime(os.Getpid())
		if err != nil {
			t.Fatal(err)
		}
		if after-before >= 50*time.Millisecond {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("CPU time grew by %s over 10s of busy loop", after-before)
		}
	}
	kib, err := PeakRSS(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if kib < 1024 {
		t.Errorf("peak RSS %d KiB", kib)
	}
	now, err := RSS(os.Getpid())
	peak, _ := PeakRSS(os.Getpid()) // read after: at least now
	if err != nil || now < 1024 || now > peak {
		t.Errorf("RSS %d KiB (%v), peak %d KiB", now, err, peak)
	}
	if v, n := ContextSwitches(os.Getpid()); v+n == 0 {
		t.Errorf("context switches: %d voluntary, %d involuntary", v, n)
	}
	if v, n := ContextSwitches(-1); v+n != 0 {
		t.Errorf("context switches of no process: %d, %d", v, n)
	}
	if _, err := CPUTime(-1); err == nil {
		t.Error("CPUTime(-1) did not fail")
	}
}
