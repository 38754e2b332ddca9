package agent

import (
	"context"
	"log/slog"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/cache"

	"github.com/capo-net/capo/daemon/agent/kubecache"
	"github.com/capo-net/capo/pkg/kubeclient"
	"github.com/capo-net/capo/pkg/wire"
)

// Cluster is the part of the cluster a decision reads: this node, a
// namespace, a pod. Node and namespace are metadata only, and every object
// is trimmed to what capo reads (kubecache/trim.go).
type Cluster interface {
	Node() *metav1.PartialObjectMetadata
	Namespace(name string) *metav1.PartialObjectMetadata
	Pod(ctx context.Context, ref wire.PodRef) *corev1.Pod
	// Successor is the live pod that now has ref's namespace and name
	// under another UID; nil when there is none or it cannot be read.
	Successor(ctx context.Context, ref wire.PodRef) *corev1.Pod
}

// informerCluster serves Cluster from informers: pods on this node only, all
// namespaces, this Node. Deleted pods are remembered for a while, so a DEL
// that arrives after a force delete is decided on the pod's real labels.
type informerCluster struct {
	kube     kubernetes.Interface
	nodeName string
	memory   func() time.Duration
	now      func() time.Time

	pods, nodes, namespaces cache.SharedIndexInformer

	mu      sync.Mutex
	deleted map[types.UID]tombstone
}

// onNodeChange calls f with this node whenever it changes.
func (f *informerCluster) onNodeChange(fn func(*metav1.PartialObjectMetadata)) {
	call := func(obj any) {
		if n, ok := obj.(*metav1.PartialObjectMetadata); ok {
			fn(n)
		}
	}
	_, _ = f.nodes.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    call,
		UpdateFunc: func(_, obj any) { call(obj) },
		DeleteFunc: func(any) { fn(nil) },
	})
}

// onPodChange calls fn with each of this node's pods that is added or
// changes, and with gone set when one is deleted.
func (f *informerCluster) onPodChange(fn func(p *corev1.Pod, gone bool)) {
	call := func(obj any, gone bool) {
		if p, ok := kubeclient.Deleted[corev1.Pod](obj); ok {
			fn(p, gone)
		}
	}
	_, _ = f.pods.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { call(obj, false) },
		UpdateFunc: func(_, obj any) { call(obj, false) },
		DeleteFunc: func(obj any) { call(obj, true) },
	})
}

// nodePods are this node's pods, as cached.
func (f *informerCluster) nodePods() []*corev1.Pod {
	return kubeclient.Listed[corev1.Pod](f.pods.GetStore().List())
}

type tombstone struct {
	pod     *corev1.Pod
	expires time.Time
}

var _ Cluster = (*informerCluster)(nil)

// newInformerCluster builds the informers: pods through the typed client
// (the agent reads a few spec and status fields), namespaces and this node
// through the metadata client, so their specs and statuses (a node's
// images, conditions and addresses) never reach the agent.
func newInformerCluster(kube kubernetes.Interface, meta metadata.Interface, nodeName string, memory func() time.Duration, now func() time.Time) *informerCluster {
	f := &informerCluster{kube: kube, nodeName: nodeName, memory: memory, now: now, deleted: map[types.UID]tombstone{}}
	onNode := informers.NewSharedInformerFactoryWithOptions(kube, 0, informers.WithTransform(kubecache.TrimPod), informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", nodeName).String()
	}))
	f.pods = onNode.Core().V1().Pods().Informer()
	f.nodes = kubecache.MetaInformer(meta, corev1.SchemeGroupVersion.WithResource("nodes"), "", fields.OneTermEqualSelector("metadata.name", nodeName), kubecache.TrimNode)
	f.namespaces = kubecache.MetaInformer(meta, corev1.SchemeGroupVersion.WithResource("namespaces"), "", nil, kubecache.TrimNamespace)
	_, _ = f.pods.AddEventHandler(cache.ResourceEventHandlerFuncs{DeleteFunc: f.remember})
	return f
}

// run starts the informers and reports when their caches are synced.
func (f *informerCluster) run(ctx context.Context) bool {
	for _, inf := range []cache.SharedIndexInformer{f.pods, f.nodes, f.namespaces} {
		go inf.Run(ctx.Done())
	}
	go f.expire(ctx)
	return cache.WaitForCacheSync(ctx.Done(), f.pods.HasSynced, f.nodes.HasSynced, f.namespaces.HasSynced)
}

func (f *informerCluster) remember(obj any) {
	pod, ok := kubeclient.Deleted[corev1.Pod](obj)
	if !ok {
		return
	}
	f.mu.Lock()
	f.deleted[pod.UID] = tombstone{pod: pod, expires: f.now().Add(f.memory())}
	f.mu.Unlock()
}

func (f *informerCluster) expire(ctx context.Context) {
	t := time.NewTicker(time.Minute)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now := f.now()
		f.mu.Lock()
		for uid, ts := range f.deleted {
			if now.After(ts.expires) {
				delete(f.deleted, uid)
			}
		}
		f.mu.Unlock()
	}
}

func (f *informerCluster) Node() *metav1.PartialObjectMetadata {
	return kubeclient.Cached[metav1.PartialObjectMetadata](f.nodes, f.nodeName)
}

func (f *informerCluster) Namespace(name string) *metav1.PartialObjectMetadata {
	return kubeclient.Cached[metav1.PartialObjectMetadata](f.namespaces, name)
}

// Pod finds the pod the sandbox belonged to: the live object if its UID
// matches, else a remembered deleted one, else the API server (a pod the
// watch has not delivered yet). nil means unknown.
func (f *informerCluster) Pod(ctx context.Context, ref wire.PodRef) *corev1.Pod {
	if ref.Name == "" {
		return nil
	}
	if p := kubeclient.Cached[corev1.Pod](f.pods, ref.Namespace+"/"+ref.Name); p != nil && (ref.UID == "" || string(p.UID) == ref.UID) {
		return p
	}
	if p := f.tombstone(ref); p != nil {
		return p
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	p, err := f.kube.CoreV1().Pods(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	if err != nil || (ref.UID != "" && string(p.UID) != ref.UID) {
		if err != nil && !apierrors.IsNotFound(err) {
			slog.Warn("pod lookup failed", "pod", ref.Namespace+"/"+ref.Name, "err", err)
		}
		return nil
	}
	return p
}

// Successor finds a later pod of ref's name (a StatefulSet's next member):
// from the cache, else the API server. A teardown replayed from the journal
// after its pod object is gone takes its owner from it.
func (f *informerCluster) Successor(ctx context.Context, ref wire.PodRef) *corev1.Pod {
	if ref.Name == "" || ref.UID == "" {
		return nil
	}
	if p := f.cachedPod(ref.Namespace, ref.Name); p != nil {
		if string(p.UID) == ref.UID {
			return nil
		}
		return p
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	p, err := f.kube.CoreV1().Pods(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	if err != nil || string(p.UID) == ref.UID {
		return nil
	}
	return p
}

// cachedPod is the live pod of that name on this node, from the cache alone.
func (f *informerCluster) cachedPod(namespace, name string) *corev1.Pod {
	return kubeclient.Cached[corev1.Pod](f.pods, namespace+"/"+name)
}

func (f *informerCluster) tombstone(ref wire.PodRef) *corev1.Pod {
	f.mu.Lock()
	defer f.mu.Unlock()
	if ref.UID != "" {
		if ts, ok := f.deleted[types.UID(ref.UID)]; ok {
			return ts.pod
		}
		return nil
	}
	var best *tombstone
	for _, ts := range f.deleted {
		if ts.pod.Namespace == ref.Namespace && ts.pod.Name == ref.Name && (best == nil || ts.expires.After(best.expires)) {
			best = &ts
		}
	}
	if best == nil {
		return nil
	}
	return best.pod
}
