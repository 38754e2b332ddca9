package kubecache

import (
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"

	"github.com/capo-net/capo/pkg/reserve"
	"github.com/capo-net/capo/pkg/selection"
)

// Everything the agent concludes from a trimmed object is what it would
// conclude from the whole one: the decision, the fixed-address warning, the
// annotations served to capo-ipam, the reservation's metadata, the sweep's
// view of the pod.
func TestTrimmedObjectsDecideAlike(t *testing.T) {
	yes := true
	gone := metav1.NewTime(time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC))
	managed := []metav1.ManagedFieldsEntry{{Manager: "kubelet", Operation: metav1.ManagedFieldsOperationUpdate}}
	pod := func(ann map[string]string, lbl map[string]string) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{
				Name: "broker-0", Namespace: "kafka", UID: "u1", Labels: lbl, Annotations: ann, ManagedFields: managed,
				OwnerReferences: []metav1.OwnerReference{{Kind: "StatefulSet", Name: "broker", UID: "s1", Controller: &yes}},
			},
			Spec:   corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{{Name: "kafka", Image: "kafka:3"}}},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.1", Conditions: []corev1.PodCondition{{Type: corev1.PodReady}}},
		}
	}
	pods := []*corev1.Pod{
		pod(map[string]string{"kubectl.kubernetes.io/last-applied-configuration": "{...}"}, map[string]string{"brokerId": "0"}),
		pod(map[string]string{selection.PodAnnotation: selection.Disabled}, map[string]string{"brokerId": "0"}),
		pod(map[string]string{selection.PodAnnotation: selection.Enabled, selection.AnnotationIPAddrs: `["10.0.0.9"]`}, nil),
		pod(map[string]string{"cni.projectcalico.org/ipv4pools": `["p1"]`}, map[string]string{"app": "zk"}),
	}
	pods[1].DeletionTimestamp = &gone
	namespaces := []*metav1.PartialObjectMetadata{
		{ObjectMeta: metav1.ObjectMeta{
			Name: "kafka", Labels: map[string]string{selection.NamespaceLabel: selection.Enabled, "team": "a"},
			Annotations: map[string]string{"cni.projectcalico.org/ipv6pools": `["p6"]`, "owner": "x"}, ManagedFields: managed,
		}},
		{ObjectMeta: metav1.ObjectMeta{Name: "kafka", Labels: map[string]string{"kubernetes.io/metadata.name": "kafka"}}},
	}
	nodes := []*metav1.PartialObjectMetadata{
		{ObjectMeta: metav1.ObjectMeta{Name: "n1", Annotations: map[string]string{selection.NodeAnnotation: selection.Enabled, "node.alpha.kubernetes.io/ttl": "0"}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{selection.NodeOptInLabel: selection.Enabled, "kubernetes.io/os": "linux"}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{"kubernetes.io/os": "linux"}}},
	}
	sels := []selection.Selector{{Name: "brokerId exists", Selector: mustSelector(t, "brokerId")}, {Name: "app=zk", Selector: mustSelector(t, "app=zk")}}
	for _, p := range pods {
		tp := trimmed[corev1.Pod](t, TrimPod, p)
		if tp.ManagedFields != nil || len(tp.Spec.Containers) != 0 || tp.Status.PodIP != "" {
			t.Errorf("%v: trimmed pod keeps what is never read: %+v", p.Annotations, tp)
		}
		if !reflect.DeepEqual(CalicoOnly(p.Annotations), CalicoOnly(tp.Annotations)) || selection.FixedAddress(selection.Of(p)) != selection.FixedAddress(selection.Of(tp)) {
			t.Errorf("%v: Calico's annotations differ once trimmed", p.Annotations)
		}
		var e, te reserve.Entry
		e.SetPod(p)
		te.SetPod(tp)
		if e != te || tp.DeletionTimestamp != p.DeletionTimestamp || tp.Spec.NodeName != p.Spec.NodeName || tp.Status.Phase != p.Status.Phase {
			t.Errorf("%v: reservation metadata or the sweep's view differ once trimmed", p.Annotations)
		}
		for _, ns := range namespaces {
			tns := trimmed[metav1.PartialObjectMetadata](t, TrimNamespace, ns)
			for _, n := range nodes {
				tn := trimmed[metav1.PartialObjectMetadata](t, TrimNode, n)
				want := selection.Decide(selection.Of(n), selection.Of(ns), selection.Of(p), sels)
				if got := selection.Decide(selection.Of(tn), selection.Of(tns), selection.Of(tp), sels); got != want {
					t.Errorf("pod %v, namespace %v, node %v: trimmed decide %+v, whole %+v", p.Annotations, ns.Labels, n.Labels, got, want)
				}
			}
			if !reflect.DeepEqual(ns.Labels, tns.Labels) {
				t.Errorf("namespace %v: labels differ once trimmed (an IPPool's namespaceSelector may name any)", ns.Labels)
			}
			if !reflect.DeepEqual(CalicoOnly(ns.Annotations), CalicoOnly(tns.Annotations)) {
				t.Errorf("namespace %v: Calico's annotations differ once trimmed", ns.Annotations)
			}
		}
	}
}

// A delete the watch missed hands over a DeletedFinalStateUnknown, whose
// object was trimmed when it was cached: it passes through.
func TestTrimPassesOtherObjectsThrough(t *testing.T) {
	d := cache.DeletedFinalStateUnknown{Key: "kafka/broker-0"}
	for _, f := range []cache.TransformFunc{TrimPod, TrimNamespace, TrimNode, TrimIdentity} {
		if got, err := f(d); err != nil || got != d {
			t.Fatalf("got %v %v", got, err)
		}
	}
}

func trimmed[T any](t *testing.T, f cache.TransformFunc, obj any) *T {
	t.Helper()
	out, err := f(obj)
	if err != nil {
		t.Fatal(err)
	}
	return out.(*T)
}

func mustSelector(t *testing.T, s string) labels.Selector {
	t.Helper()
	sel, err := labels.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return sel
}
