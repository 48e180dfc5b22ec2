package agent

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	clocktesting "k8s.io/utils/clock/testing"
)

// TestAttestWaitsOnTheClock: a caller whose pod has not reached the cache
// yet is held for up to AttestTimeout of the agent's clock, served once its
// pod arrives, and refused after the timeout.
func TestAttestWaitsOnTheClock(t *testing.T) {
	t.Parallel()
	const late, never = "0d7e3b4a-3c4f-4bb1-9a57-3a8e6c1f0f01", "0d7e3b4a-3c4f-4bb1-9a57-3a8e6c1f0f02"
	proc := t.TempDir()
	for pid, uid := range map[string]string{"41": late, "42": never} {
		if err := os.MkdirAll(filepath.Join(proc, pid), 0o755); err != nil {
			t.Fatal(err)
		}
		cg := "0::/kubepods/burstable/pod" + uid + "/ctr\n"
		if err := os.WriteFile(filepath.Join(proc, pid, "cgroup"), []byte(cg), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	client := fake.NewClientset()
	fc := clocktesting.NewFakeClock(time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC))
	a, err := New(Config{NodeName: "node-a", Client: client, ProcRoot: proc, Clock: fc}) // AttestTimeout: 5s
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go a.Run(ctx)
	poll := func(what string, cond func() bool) {
		t.Helper()
		if err := wait.PollUntilContextTimeout(ctx, time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) { return cond(), nil }); err != nil {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
	poll("the pod cache", a.HasSynced)

	type result struct {
		pod *corev1.Pod
		err error
	}
	attest := func(pid int32) chan result {
		c := make(chan result, 1)
		go func() { p, err := a.Attest(ctx, pid); c <- result{p, err} }()
		poll("the attestation to wait on the clock", fc.HasWaiters)
		return c
	}

	// The pod arrives 4s into the wait: served.
	got := attest(41)
	fc.Step(4 * time.Second)
	poll("the attestation to wait again", fc.HasWaiters)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-1", Namespace: "shop", UID: late}, Spec: corev1.PodSpec{NodeName: "node-a"}}
	if _, err := client.CoreV1().Pods("shop").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll("the pod in the cache", func() bool {
		objs, _ := a.informer.GetIndexer().ByIndex(uidIndex, late)
		return len(objs) == 1
	})
	fc.Step(50 * time.Millisecond)
	if r := <-got; r.err != nil || r.pod.Name != "web-1" {
		t.Fatalf("Attest of a pod that arrived within the timeout: %v %v", r.pod, r.err)
	}

	// The pod never arrives: refused once 5s have passed, not before.
	got = attest(42)
	fc.Step(5 * time.Second)
	poll("the attestation to wait again", fc.HasWaiters)
	select {
	case r := <-got:
		t.Fatalf("Attest gave up at the timeout, not after it: %v", r.err)
	default:
	}
	fc.Step(50 * time.Millisecond)
	r := <-got
	var st *status
	if !errors.As(r.err, &st) || st.code != http.StatusForbidden || !strings.Contains(r.err.Error(), "waited 5s") {
		t.Fatalf("Attest of a pod that never arrived: %v, want 403 after waiting 5s", r.err)
	}
}
