package nodepods

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// Selector selects the pods bound to node.
func Selector(node string) fields.Selector {
	return fields.OneTermEqualSelector("spec.nodeName", node)
}

// NewInformer returns a shared informer on the pods bound to node, without
// periodic resync. The caller adds its handlers and indexers, then runs it.
func NewInformer(client kubernetes.Interface, node string) cache.SharedIndexInformer {
	f := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = Selector(node).String()
	}))
	return f.Core().V1().Pods().Informer()
}
