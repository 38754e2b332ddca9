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
	"k8s.io/client-go/tools/cache"

	"github.com/capo-net/capo/pkg/kubeclient"
	"github.com/capo-net/capo/pkg/wire"
)

// Cluster is the part of the cluster a decision reads: this node, a
// namespace, a pod.
type Cluster interface {
	Node() *corev1.Node
	Namespace(name string) *corev1.Namespace
	Pod(ctx context.Context, ref wire.PodRef) *corev1.Pod
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
func (f *informerCluster) onNodeChange(fn func(*corev1.Node)) {
	call := func(obj any) {
		if n, ok := obj.(*corev1.Node); ok {
			fn(n)
		}
	}
	_, _ = f.nodes.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    call,
		UpdateFunc: func(_, obj any) { call(obj) },
		DeleteFunc: func(any) { fn(nil) },
	})
}

type tombstone struct {
	pod     *corev1.Pod
	expires time.Time
}

var _ Cluster = (*informerCluster)(nil)

func newInformerCluster(kube kubernetes.Interface, nodeName string, memory func() time.Duration, now func() time.Time) *informerCluster {
	f := &informerCluster{kube: kube, nodeName: nodeName, memory: memory, now: now, deleted: map[types.UID]tombstone{}}
	onNode := informers.NewSharedInformerFactoryWithOptions(kube, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", nodeName).String()
	}))
	thisNode := informers.NewSharedInformerFactoryWithOptions(kube, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("metadata.name", nodeName).String()
	}))
	all := informers.NewSharedInformerFactory(kube, 0)
	f.pods = onNode.Core().V1().Pods().Informer()
	f.nodes = thisNode.Core().V1().Nodes().Informer()
	f.namespaces = all.Core().V1().Namespaces().Informer()
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

func (f *informerCluster) Node() *corev1.Node {
	return kubeclient.Cached[corev1.Node](f.nodes, f.nodeName)
}

func (f *informerCluster) Namespace(name string) *corev1.Namespace {
	return kubeclient.Cached[corev1.Namespace](f.namespaces, name)
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
