// Package kubecache is what the agent's informers keep of the objects they
// cache (only what the agent reads) and how it follows objects' metadata
// alone.
package kubecache

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/capo-net/capo/pkg/selection"
)

// The agent's caches keep only what it reads. A pod as the API server
// sends it is mostly spec, status and managed fields; a node carries its
// images and conditions; neither is read here. What is read:
//
//	pod        name, namespace, UID, labels (any selector may name any
//	           label), capo's and Calico's annotations, owner references,
//	           node name, phase, deletion; its addresses, whether they are
//	           the host's, and whether its init containers have run
//	           (calico-node's replacement, ../rewritewindow.go)
//	namespace  labels (capo's, and any an IPPool's namespaceSelector
//	           names, judged when a returning pod is offered its
//	           address); Calico's annotations (served to capo-ipam)
//	node       capo's opt-in label and annotation
const (
	capoPrefix   = "capo.io/"
	calicoPrefix = "cni.projectcalico.org/"
)

// TrimPod is the pods informer's transform.
func TrimPod(obj any) (any, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil // a DeletedFinalStateUnknown: its object was trimmed when cached
	}
	return &corev1.Pod{
		TypeMeta: p.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{
			Name: p.Name, Namespace: p.Namespace, UID: p.UID, ResourceVersion: p.ResourceVersion,
			Labels: p.Labels, Annotations: keepAnnotations(p.Annotations, capoPrefix, calicoPrefix),
			OwnerReferences: p.OwnerReferences, DeletionTimestamp: p.DeletionTimestamp,
		},
		Spec:   corev1.PodSpec{NodeName: p.Spec.NodeName, HostNetwork: p.Spec.HostNetwork},
		Status: corev1.PodStatus{Phase: p.Status.Phase, PodIPs: p.Status.PodIPs, Conditions: initializedOnly(p.Status.Conditions)},
	}, nil
}

// initializedOnly is the pod's Initialized condition, its status alone.
func initializedOnly(cs []corev1.PodCondition) []corev1.PodCondition {
	for _, c := range cs {
		if c.Type == corev1.PodInitialized {
			return []corev1.PodCondition{{Type: c.Type, Status: c.Status}}
		}
	}
	return nil
}

// TrimNamespace is the namespaces informer's transform.
func TrimNamespace(obj any) (any, error) {
	return trimMeta(obj, func(string) bool { return true }, calicoPrefix)
}

// TrimIdentity keeps an object's identity and deletion only.
func TrimIdentity(obj any) (any, error) {
	return trimMeta(obj, func(string) bool { return false })
}

// TrimNode is this node's informer's transform.
func TrimNode(obj any) (any, error) {
	return trimMeta(obj, func(k string) bool { return k == selection.NodeOptInLabel }, capoPrefix)
}

var _ = []cache.TransformFunc{TrimPod, TrimNamespace, TrimNode, TrimIdentity}

// trimMeta keeps an object's identity, the labels keep accepts and the
// annotations under prefixes.
func trimMeta(obj any, keep func(label string) bool, prefixes ...string) (any, error) {
	m, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok {
		return obj, nil
	}
	var labels map[string]string
	for k, v := range m.Labels {
		if keep(k) {
			if labels == nil {
				labels = map[string]string{}
			}
			labels[k] = v
		}
	}
	return &metav1.PartialObjectMetadata{
		TypeMeta: m.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{
			Name: m.Name, Namespace: m.Namespace, UID: m.UID, ResourceVersion: m.ResourceVersion,
			Labels: labels, Annotations: keepAnnotations(m.Annotations, prefixes...), DeletionTimestamp: m.DeletionTimestamp,
		},
	}, nil
}

// keepAnnotations is the annotations under prefixes; nil when none are.
func keepAnnotations(m map[string]string, prefixes ...string) map[string]string {
	var out map[string]string
	for k, v := range m {
		for _, p := range prefixes {
			if strings.HasPrefix(k, p) {
				if out == nil {
					out = make(map[string]string, 2)
				}
				out[k] = v
				break
			}
		}
	}
	return out
}

// CalicoOnly keeps the annotations the calico plugin reads for IPAM, as
// the socket serves them to capo-ipam: what TrimPod and TrimNamespace keep.
func CalicoOnly(m map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range m {
		if strings.HasPrefix(k, "cni.projectcalico.org/") {
			out[k] = v
		}
	}
	return out
}
