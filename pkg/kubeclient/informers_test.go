package kubeclient

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

func TestCachedAndDeleted(t *testing.T) {
	inf := cache.NewSharedIndexInformer(&cache.ListWatch{}, &corev1.Pod{}, 0, cache.Indexers{})
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "kafka", Name: "b-0"}}
	if err := inf.GetStore().Add(p); err != nil {
		t.Fatal(err)
	}
	if got := Cached[corev1.Pod](inf, "kafka/b-0"); got != p {
		t.Fatalf("Cached = %v", got)
	}
	if got := Cached[corev1.Pod](inf, "kafka/b-1"); got != nil {
		t.Fatalf("absent key gave %v", got)
	}
	for _, ev := range []any{p, cache.DeletedFinalStateUnknown{Key: "kafka/b-0", Obj: p}} {
		if got, ok := Deleted[corev1.Pod](ev); !ok || got != p {
			t.Fatalf("Deleted(%T) = %v %v", ev, got, ok)
		}
	}
	if _, ok := Deleted[corev1.Node](p); ok {
		t.Fatal("a pod read as a node")
	}
}
