package gate

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"

	"github.com/capo-net/capo/pkg/calico/apigroup"
)

// watch follows ClusterInformation default in the mode's group through
// dyn until ctx ends: a lock is seen within a watch event, well inside
// the 10 s Calico waits after locking before it copies anything.
func (l *Lock) watch(ctx context.Context, dyn dynamic.Interface) {
	gv, _ := schema.ParseGroupVersion(l.mode.Group)
	gvr := gv.WithResource(apigroup.ClusterInformation.Resource(l.mode.Group))
	inf := dynamicinformer.NewFilteredDynamicInformer(dyn, gvr, "", 0, cache.Indexers{}, func(o *metav1.ListOptions) {
		o.FieldSelector = "metadata.name=default"
	}).Informer()
	set := func(obj any) {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			return
		}
		ready, found, _ := unstructured.NestedBool(u.Object, "spec", "datastoreReady")
		if !found {
			ready = true // not said: not locked, as Calico's own migration reads it
		}
		l.set(&ready)
	}
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    set,
		UpdateFunc: func(_, obj any) { set(obj) },
		DeleteFunc: func(any) { l.set(nil) },
	})
	_ = inf.SetWatchErrorHandler(func(_ *cache.Reflector, err error) { l.unfollow(err) })
	go inf.Run(ctx.Done())
	if cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) && len(inf.GetStore().List()) == 0 {
		l.set(nil)
	}
}
