package apply

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trellis-dev/trellis/internal/testutil/cluster"
)

// countingReader counts the reads that reach the apiserver.
type countingReader struct {
	client.Reader
	gets atomic.Int32
}

func (r *countingReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	r.gets.Add(1)
	return r.Reader.Get(ctx, key, obj, opts...)
}

// TestIntegrationEnsureOwnerGone: a cache behind the apiserver still holds
// an owner that was deleted, recreated under a new UID, or is being
// deleted; Ensure creates nothing for it (a real apiserver answers the
// owner check), and creates as before for an owner that is there, reading
// it once per pass however many children it creates.
func TestIntegrationEnsureOwnerGone(t *testing.T) {
	cp := cluster.Start(t, cluster.Options{})
	ctx := context.Background()
	c, err := client.New(cp.Config, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	newOwner := func() *corev1.ConfigMap {
		o := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "owner", Namespace: "default"}}
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
		o.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMap"))
		return o
	}
	child := func(owner *corev1.ConfigMap, name string) *corev1.ConfigMap {
		return &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(owner, corev1.SchemeGroupVersion.WithKind("ConfigMap"))}},
			Data:       map[string]string{"k": "v"},
		}
	}
	absent := func(name string) {
		t.Helper()
		if err := c.Get(ctx, client.ObjectKey{Namespace: "default", Name: name}, &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
			t.Fatalf("child %s: want not found, got %v", name, err)
		}
	}

	// Deleted: the cache's copy is all that is left.
	stale := newOwner()
	if err := c.Delete(ctx, stale.DeepCopy()); err != nil {
		t.Fatal(err)
	}
	_, err = Ensure(ctx, c, c, c, stale, child(stale, "a"), OwnerLive(c, stale))
	if !errors.Is(err, ErrOwnerGone) {
		t.Fatalf("deleted owner: want ErrOwnerGone, got %v", err)
	}
	absent("a")

	// Recreated under the same name: a new UID is another owner.
	current := newOwner()
	_, err = EnsureCreated(ctx, c, c, c, stale, child(stale, "a"), OwnerLive(c, stale))
	if !errors.Is(err, ErrOwnerGone) {
		t.Fatalf("recreated owner: want ErrOwnerGone, got %v", err)
	}
	absent("a")

	// There: two children, one read of the owner.
	reader := &countingReader{Reader: c}
	check := OwnerLive(reader, current)
	for _, name := range []string{"a", "b"} {
		if res, err := Ensure(ctx, c, c, reader, current, child(current, name), check); err != nil || res != Created {
			t.Fatalf("child %s: got %q, %v; want created", name, res, err)
		}
	}
	if n := reader.gets.Load(); n != 1 {
		t.Errorf("owner read %d times for two creates, want 1", n)
	}
	// Nothing to create: no read at all.
	reader = &countingReader{Reader: c}
	if res, err := Ensure(ctx, c, c, reader, current, child(current, "a"), OwnerLive(reader, current)); err != nil || res != Unchanged {
		t.Fatalf("existing child: got %q, %v; want unchanged", res, err)
	}
	if n := reader.gets.Load(); n != 0 {
		t.Errorf("owner read %d times with nothing to create, want 0", n)
	}

	// Being deleted (a finalizer holds it): no new children either.
	current.Finalizers = []string{"example.com/hold"}
	if err := c.Update(ctx, current); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(ctx, current.DeepCopy()); err != nil {
		t.Fatal(err)
	}
	_, err = Ensure(ctx, c, c, c, current, child(current, "c"), OwnerLive(c, current))
	if !errors.Is(err, ErrOwnerGone) {
		t.Fatalf("owner being deleted: want ErrOwnerGone, got %v", err)
	}
	absent("c")
}
