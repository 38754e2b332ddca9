package testbed

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// PodOption edits a pod before it is created.
type PodOption func(*corev1.Pod)

// WithLabels sets pod labels.
func WithLabels(kv map[string]string) PodOption {
	return func(p *corev1.Pod) { p.Labels = kv }
}

// WithAnnotations sets pod annotations.
func WithAnnotations(kv map[string]string) PodOption {
	return func(p *corev1.Pod) { p.Annotations = kv }
}

// CreatePod creates a pod bound to the env's node, as the scheduler would.
func (e *Env) CreatePod(name string, opts ...PodOption) *corev1.Pod {
	e.T.Helper()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.Namespace},
		Spec: corev1.PodSpec{
			NodeName:   e.Node,
			Containers: []corev1.Container{{Name: "main", Image: "registry.invalid/app:1"}},
		},
	}
	for _, o := range opts {
		o(p)
	}
	out, err := e.Kube.CoreV1().Pods(e.Namespace).Create(context.Background(), p, metav1.CreateOptions{})
	if err != nil {
		e.T.Fatalf("creating pod %s: %v", name, err)
	}
	return out
}

// DeletePod deletes a pod object; grace 0 is a force delete.
func (e *Env) DeletePod(name string, grace int64) {
	e.T.Helper()
	err := e.Kube.CoreV1().Pods(e.Namespace).Delete(context.Background(), name, metav1.DeleteOptions{GracePeriodSeconds: &grace})
	if err != nil {
		e.T.Fatalf("deleting pod %s: %v", name, err)
	}
}

// PodUID is the UID of a pod object, for CNI_ARGS.
func PodUID(p *corev1.Pod) types.UID { return p.UID }

// WithOwner makes the pod controlled by a workload, as a StatefulSet's pods are.
func WithOwner(kind, name string) PodOption {
	return func(p *corev1.Pod) {
		yes := true
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: kind, Name: name, UID: types.UID("uid-" + kind + "-" + name), Controller: &yes}}
	}
}

// WithOwnerRef makes ref the pod's controller (after StatefulPod, it
// replaces the apps/v1 StatefulSet that one names).
func WithOwnerRef(ref metav1.OwnerReference) PodOption {
	return func(p *corev1.Pod) {
		yes := true
		ref.Controller = &yes
		p.OwnerReferences = []metav1.OwnerReference{ref}
	}
}

// StatefulPod is a pod as a StatefulSet creates it: Capo's default selector
// matches its statefulset.kubernetes.io/pod-name label.
func StatefulPod(set string) PodOption {
	return func(p *corev1.Pod) {
		if p.Labels == nil {
			p.Labels = map[string]string{}
		}
		p.Labels["app"] = set
		p.Labels["statefulset.kubernetes.io/pod-name"] = p.Name
		WithOwner("StatefulSet", set)(p)
	}
}

// CreateStatefulSet creates a StatefulSet object (no controller-manager runs
// here, so it makes no pods; tests create them with OwnedBy).
func (e *Env) CreateStatefulSet(name string, replicas int32) *appsv1.StatefulSet {
	e.T.Helper()
	return e.CreateStatefulSetAnnotated(name, replicas, nil)
}

// CreateStatefulSetAnnotated is CreateStatefulSet with annotations on the
// set from its creation, as a chart writes them.
func (e *Env) CreateStatefulSetAnnotated(name string, replicas int32, annotations map[string]string) *appsv1.StatefulSet {
	e.T.Helper()
	s := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: annotations}, Spec: appsv1.StatefulSetSpec{
		Replicas: &replicas, ServiceName: name,
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
		Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "registry.invalid/app:1"}}},
		},
	}}
	out, err := e.Kube.AppsV1().StatefulSets(e.Namespace).Create(context.Background(), s, metav1.CreateOptions{})
	if err != nil {
		e.T.Fatalf("statefulset %s: %v", name, err)
	}
	return out
}

// OwnedBy makes the pod one of set's, with its labels and its real UID.
func OwnedBy(set *appsv1.StatefulSet) PodOption {
	return func(p *corev1.Pod) {
		StatefulPod(set.Name)(p)
		p.OwnerReferences[0].UID = set.UID
	}
}
