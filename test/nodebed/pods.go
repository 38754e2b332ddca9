package nodebed

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// WaitRunning waits until n pods matching selector in ns run with an
// address, and returns them by name.
func (b *Bed) WaitRunning(t testing.TB, ns, selector string, n int) map[string]*corev1.Pod {
	t.Helper()
	var out map[string]*corev1.Pod
	Eventually(t, 3*time.Minute, fmt.Sprintf("%d running pods %s in %s", n, selector, ns), func() error {
		pods, err := b.Kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return err
		}
		out = map[string]*corev1.Pod{}
		for i := range pods.Items {
			p := &pods.Items[i]
			if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning && p.Status.PodIP != "" {
				out[p.Name] = p
			}
		}
		if len(out) != n {
			return fmt.Errorf("%d running of %d; %s", len(out), n, podSummary(pods.Items))
		}
		return nil
	})
	return out
}

// Pod reads a pod; nil when it does not exist.
func (b *Bed) Pod(ns, name string) *corev1.Pod {
	p, err := b.Kube.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		return nil
	}
	return p
}

// PodEvents are the reasons and messages of the Events about a pod object.
func (b *Bed) PodEvents(ns string, uid string) []string {
	evs, err := b.Kube.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{FieldSelector: "involvedObject.uid=" + uid})
	if err != nil {
		return []string{err.Error()}
	}
	var out []string
	for _, e := range evs.Items {
		out = append(out, e.Reason+": "+e.Message)
	}
	return out
}

func podSummary(pods []corev1.Pod) string {
	s := ""
	for _, p := range pods {
		s += fmt.Sprintf("%s %s %s; ", p.Name, p.Status.Phase, p.Status.PodIP)
	}
	return s
}
