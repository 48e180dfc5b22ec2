package nodepods_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"

	"github.com/trellis-dev/trellis/internal/nodepods"
)

func TestSelector(t *testing.T) {
	if got, want := nodepods.Selector("node-a").String(), "spec.nodeName=node-a"; got != want {
		t.Errorf("Selector = %q, want %q", got, want)
	}
}

// Every request the informer makes, its initial list and its watch, asks
// the apiserver for the node's pods only. (The fake clientset does not
// filter by field, so the test reads the requests, not the cache.)
func TestInformerAsksOnlyForTheNodesPods(t *testing.T) {
	c := fake.NewClientset()
	type request struct{ verb, resource, fields string }
	var mu sync.Mutex
	var got []request
	record := func(a clienttesting.Action) {
		r := request{verb: a.GetVerb(), resource: a.GetResource().Resource}
		switch a := a.(type) {
		case clienttesting.ListAction:
			r.fields = a.GetListRestrictions().Fields.String()
		case clienttesting.WatchAction:
			r.fields = a.GetWatchRestrictions().Fields.String()
		}
		mu.Lock()
		got = append(got, r)
		mu.Unlock()
	}
	c.PrependReactor("list", "*", func(a clienttesting.Action) (bool, runtime.Object, error) {
		record(a)
		return false, nil, nil
	})
	c.PrependWatchReactor("*", func(a clienttesting.Action) (bool, watch.Interface, error) {
		record(a)
		return false, nil, nil
	})
	watched := func() bool {
		mu.Lock()
		defer mu.Unlock()
		return slices.ContainsFunc(got, func(r request) bool { return r.verb == "watch" })
	}

	inf := nodepods.NewInformer(c, "node-a")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go inf.Run(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatal("the informer never synced")
	}
	for deadline := time.Now().Add(10 * time.Second); !watched(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the informer never started its watch")
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for _, r := range got {
		if r.resource != "pods" || r.fields != "spec.nodeName=node-a" {
			t.Errorf("request %+v, want one for pods with field selector spec.nodeName=node-a", r)
		}
	}
}
