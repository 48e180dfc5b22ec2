package issuer

import (
	"bytes"
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/trellis-dev/trellis/api/wellknown"
)

const (
	// BundleConfigMap is published in every namespace.
	BundleConfigMap = "trellis-trust-bundle"
	// BundleKey is its key holding the PEM roots.
	BundleKey = "bundle.pem"
)

// PublishBundles keeps a BundleConfigMap with the authority's roots in
// every namespace until ctx ends: on new namespaces, on edits or deletion of
// the ConfigMap, and when the roots change (checked every interval). Run it
// in one replica (leader election).
func (is *Issuer) PublishBundles(ctx context.Context, client kubernetes.Interface, interval time.Duration) {
	nsf := informers.NewSharedInformerFactory(client, 0)
	nsInf := nsf.Core().V1().Namespaces().Informer()
	cmf := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("metadata.name", BundleConfigMap).String()
	}))
	cmInf := cmf.Core().V1().ConfigMaps().Informer()
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())
	defer q.ShutDown()
	enqueue := func(obj any) {
		switch o := obj.(type) {
		case *corev1.Namespace:
			q.Add(o.Name)
		case *corev1.ConfigMap:
			q.Add(o.Namespace)
		case cache.DeletedFinalStateUnknown:
			if cm, ok := o.Obj.(*corev1.ConfigMap); ok {
				q.Add(cm.Namespace)
			}
		}
	}
	h := cache.ResourceEventHandlerFuncs{AddFunc: enqueue, UpdateFunc: func(_, n any) { enqueue(n) }, DeleteFunc: enqueue}
	_, _ = nsInf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: enqueue})
	_, _ = cmInf.AddEventHandler(h)
	nsf.Start(ctx.Done())
	cmf.Start(ctx.Done())
	cache.WaitForCacheSync(ctx.Done(), nsInf.HasSynced, cmInf.HasSynced)

	// Roots changed: every namespace again.
	go func() {
		last := is.State().Bundle()
		t := is.cfg.Clock.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C():
			}
			if b := is.State().Bundle(); !bytes.Equal(b, last) {
				last = b
				for _, ns := range nsInf.GetStore().ListKeys() {
					q.Add(ns)
				}
			}
		}
	}()
	go func() { <-ctx.Done(); q.ShutDown() }()
	for {
		ns, quit := q.Get()
		if quit {
			return
		}
		if err := is.publish(ctx, client, cmInf.GetStore(), ns); err != nil {
			is.log.Warn("failed to publish the trust bundle; will retry", "namespace", ns, "err", err)
			q.AddRateLimited(ns)
		} else {
			q.Forget(ns)
		}
		q.Done(ns)
	}
}

func (is *Issuer) publish(ctx context.Context, client kubernetes.Interface, store cache.Store, ns string) error {
	bundle := string(is.State().Bundle())
	obj, exists, err := store.GetByKey(ns + "/" + BundleConfigMap)
	if err != nil {
		return fmt.Errorf("get configmap %s/%s from the cache: %w", ns, BundleConfigMap, err)
	}
	if exists {
		cm := obj.(*corev1.ConfigMap)
		if cm.Data[BundleKey] == bundle {
			return nil
		}
		cm = cm.DeepCopy()
		if cm.Data == nil {
			cm.Data = map[string]string{}
		}
		cm.Data[BundleKey] = bundle
		if _, err := client.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("update configmap %s/%s: %w", ns, BundleConfigMap, err)
		}
		return nil
	}
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: BundleConfigMap, Namespace: ns, Labels: map[string]string{wellknown.LabelManagedBy: "trellis-cert-issuer"}},
		Data:       map[string]string{BundleKey: bundle},
	}
	_, err = client.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) || apierrors.IsNotFound(err) { // a race with the cache, or a namespace being deleted
		return nil
	}
	if err != nil {
		return fmt.Errorf("create configmap %s/%s: %w", ns, BundleConfigMap, err)
	}
	return nil
}
