package kubecache

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/tools/cache"
)

// MetaInformer follows the metadata of a resource, in namespace ("" for
// all or cluster-scoped), of the objects sel selects (nil: all).
func MetaInformer(meta metadata.Interface, gvr schema.GroupVersionResource, namespace string, sel fields.Selector, trim cache.TransformFunc) cache.SharedIndexInformer {
	tweak := func(o *metav1.ListOptions) {
		if sel != nil {
			o.FieldSelector = sel.String()
		}
	}
	inf := metadatainformer.NewFilteredMetadataInformer(meta, gvr, namespace, 0, cache.Indexers{}, tweak).Informer()
	_ = inf.SetTransform(trim) // fails only once the informer runs
	return inf
}
