package kubeclient

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestListedKeepsOnlyTheType(t *testing.T) {
	objs := []any{
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "a"}},
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}},
		corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "by-value"}},
		nil,
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "b"}},
	}
	got := Listed[corev1.Pod](objs)
	if len(got) != 2 || got[0].Name != "a" || got[1].Name != "b" {
		t.Fatalf("Listed = %v, want pods a and b", got)
	}
	if n := len(Listed[corev1.Namespace](objs)); n != 0 {
		t.Fatalf("Listed namespaces = %d, want 0", n)
	}
}
