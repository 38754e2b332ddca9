package controller

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/capo-net/capo/pkg/kubeclient"
	"github.com/capo-net/capo/pkg/release"
)

// caches are the controller's view of the cluster. Pods are trimmed to
// what node loss needs, so a large cluster's pods fit in little memory.
type caches struct {
	factory                             informers.SharedInformerFactory
	namespaces, sets, replicas, deploys cache.SharedIndexInformer
	nodes, pods                         cache.SharedIndexInformer
	requests                            cache.SharedIndexInformer // the release ConfigMap
}

func newCaches(kube kubernetes.Interface, agents, calicoNodes labels.Selector, namespace, releaseConfigMap string) *caches {
	f := informers.NewSharedInformerFactoryWithOptions(kube, 0, informers.WithTransform(stripManagedFields))
	c := &caches{
		factory:    f,
		namespaces: f.Core().V1().Namespaces().Informer(),
		sets:       f.Apps().V1().StatefulSets().Informer(),
		replicas:   f.Apps().V1().ReplicaSets().Informer(),
		deploys:    f.Apps().V1().Deployments().Informer(),
		nodes:      f.Core().V1().Nodes().Informer(),
		requests:   newRequests(kube, namespace, releaseConfigMap),
	}
	pods := informers.NewSharedInformerFactoryWithOptions(kube, 0, informers.WithTransform(trimPod(agents, calicoNodes)))
	c.pods = pods.Core().V1().Pods().Informer()
	_ = c.pods.AddIndexers(cache.Indexers{byNode: indexByNode, byTTL: indexByTTL})
	return c
}

func (c *caches) start(stop <-chan struct{}) bool {
	for _, inf := range c.all() {
		go inf.Run(stop)
	}
	synced := make([]cache.InformerSynced, 0, 7)
	for _, inf := range c.all() {
		synced = append(synced, inf.HasSynced)
	}
	return cache.WaitForCacheSync(stop, synced...)
}

func (c *caches) all() []cache.SharedIndexInformer {
	return []cache.SharedIndexInformer{c.namespaces, c.sets, c.replicas, c.deploys, c.nodes, c.pods, c.requests}
}

// stripManagedFields drops server-side-apply bookkeeping: often the larger
// part of an object, and nothing capo reads.
func stripManagedFields(obj any) (any, error) {
	if m, ok := obj.(metav1.Object); ok {
		m.SetManagedFields(nil)
	}
	return obj, nil
}

// trimPod keeps what selection, node coverage and events need; an agent
// pod also keeps its readiness, and calico-node's whether it is
// initialized (its install-cni has run).
func trimPod(agents, calicoNodes labels.Selector) cache.TransformFunc {
	return func(obj any) (any, error) {
		p, ok := obj.(*corev1.Pod)
		if !ok {
			return obj, nil
		}
		out := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{
				Name: p.Name, Namespace: p.Namespace, UID: p.UID, ResourceVersion: p.ResourceVersion,
				Labels: p.Labels, Annotations: p.Annotations, OwnerReferences: p.OwnerReferences, DeletionTimestamp: p.DeletionTimestamp,
				DeletionGracePeriodSeconds: p.DeletionGracePeriodSeconds,
			},
			Spec:   corev1.PodSpec{NodeName: p.Spec.NodeName},
			Status: corev1.PodStatus{PodIPs: p.Status.PodIPs, PodIP: p.Status.PodIP, Phase: p.Status.Phase},
		}
		// Readiness: an agent's says whether its node is covered; an ended
		// pod's last change dates its teardown (tornDownAt).
		ended := p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded
		calicoNode := !calicoNodes.Empty() && calicoNodes.Matches(labels.Set(p.Labels))
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && (ended || agents.Matches(labels.Set(p.Labels))) || c.Type == corev1.PodInitialized && calicoNode {
				out.Status.Conditions = append(out.Status.Conditions, corev1.PodCondition{Type: c.Type, Status: c.Status, LastTransitionTime: c.LastTransitionTime})
			}
		}
		return out, nil
	}
}

// world is what the planner needs from the caches.
func (c *caches) world() release.World {
	w := release.World{
		Namespaces:   map[string]bool{},
		Owners:       map[release.OwnerKey]release.Owner{},
		TrackedKinds: map[string]bool{"StatefulSet": true, "ReplicaSet": true},
	}
	for _, ns := range kubeclient.Listed[corev1.Namespace](c.namespaces.GetStore().List()) {
		if ns.DeletionTimestamp == nil && ns.Status.Phase != corev1.NamespaceTerminating {
			w.Namespaces[ns.Name] = true
		}
	}
	for _, s := range kubeclient.Listed[appsv1.StatefulSet](c.sets.GetStore().List()) {
		if ow, ok := setOwner(s); ok {
			w.Owners[release.OwnerKey{Kind: "StatefulSet", Namespace: s.Namespace, Name: s.Name}] = ow
		}
	}
	deploys := map[string]string{} // ns/name -> uid
	for _, d := range kubeclient.Listed[appsv1.Deployment](c.deploys.GetStore().List()) {
		if d.DeletionTimestamp == nil {
			deploys[d.Namespace+"/"+d.Name] = string(d.UID)
		}
	}
	for _, rs := range kubeclient.Listed[appsv1.ReplicaSet](c.replicas.GetStore().List()) {
		if ow, ok := replicaSetOwner(rs, deploys[rs.Namespace+"/"+parentName(rs)]); ok {
			w.Owners[release.OwnerKey{Kind: "ReplicaSet", Namespace: rs.Namespace, Name: rs.Name}] = ow
		}
	}
	return w
}

// setOwner is s as the planner reads it; false while it is being deleted
// (its pods are going). Its ScaleDownAnnotation is read with the policy.
func setOwner(s *appsv1.StatefulSet) (release.Owner, bool) {
	ow := release.Owner{UID: string(s.UID), StatefulSet: true, Replicas: 1}
	if s.Spec.Replicas != nil {
		ow.Replicas = *s.Spec.Replicas
	}
	if s.Spec.Ordinals != nil {
		ow.OrdinalStart = s.Spec.Ordinals.Start
	}
	return ow, s.DeletionTimestamp == nil
}

// parentName is the name of rs's controlling Deployment; "" for none.
func parentName(rs *appsv1.ReplicaSet) string {
	if ref := metav1.GetControllerOf(rs); ref != nil && ref.Kind == "Deployment" {
		return ref.Name
	}
	return ""
}

// replicaSetOwner is rs as the planner reads it, parentUID the UID of the
// live Deployment of parentName's name ("" none); false while rs is being
// deleted.
func replicaSetOwner(rs *appsv1.ReplicaSet, parentUID string) (release.Owner, bool) {
	ow := release.Owner{UID: string(rs.UID)}
	if ref := metav1.GetControllerOf(rs); ref != nil && ref.Kind == "Deployment" {
		ow.ParentGone = parentUID != string(ref.UID)
	}
	return ow, rs.DeletionTimestamp == nil
}

func (c *caches) node(name string) *corev1.Node { return kubeclient.Cached[corev1.Node](c.nodes, name) }

func (c *caches) namespace(name string) *corev1.Namespace {
	return kubeclient.Cached[corev1.Namespace](c.namespaces, name)
}

func (c *caches) pod(ns, name string) *corev1.Pod {
	return kubeclient.Cached[corev1.Pod](c.pods, ns+"/"+name)
}
