package kubeclient

import "k8s.io/client-go/tools/cache"

// Cached is the object an informer holds under key ("name", or
// "namespace/name"), or nil.
func Cached[T any](inf cache.SharedIndexInformer, key string) *T {
	obj, ok, _ := inf.GetStore().GetByKey(key)
	if !ok {
		return nil
	}
	t, _ := obj.(*T)
	return t
}

// Deleted is the object of a delete event, also when the watch missed the
// delete and the informer hands over the last state it knew.
func Deleted[T any](obj any) (*T, bool) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	t, ok := obj.(*T)
	return t, ok
}

// Listed is the objects of type T among objs (a store's or an index's list).
// An informer's store holds one type, so nothing is skipped in practice; the
// check keeps a stray object from panicking the process.
func Listed[T any](objs []any) []*T {
	out := make([]*T, 0, len(objs))
	for _, o := range objs {
		if t, ok := o.(*T); ok {
			out = append(out, t)
		}
	}
	return out
}
