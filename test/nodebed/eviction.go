package nodebed

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// HighPriority is a priority class for pods a test wants ranked after its
// victim under node pressure.
const HighPriority = "realnode-high"

// EnsurePriorityClasses creates the bed's priority classes.
func (b *Bed) EnsurePriorityClasses(ctx context.Context) error {
	pc := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: HighPriority}, Value: 1000}
	if _, err := b.Kube.SchedulingV1().PriorityClasses().Create(ctx, pc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return nil
}

// Evicted reports whether the kubelet has finished evicting p: Failed with
// reason Evicted, or Succeeded with the DisruptionTarget condition the
// kubelet sets (a container that exits 0 on SIGTERM leaves no reason).
func Evicted(p *corev1.Pod) bool {
	switch p.Status.Phase {
	case corev1.PodFailed:
		return p.Status.Reason == "Evicted"
	case corev1.PodSucceeded:
		return DisruptedByKubelet(p)
	}
	return false
}

// DisruptedByKubelet reports the DisruptionTarget condition the kubelet
// sets when it evicts.
func DisruptedByKubelet(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.DisruptionTarget && c.Status == corev1.ConditionTrue && c.Reason == "TerminationByKubelet" {
			return true
		}
	}
	return false
}

// PressureEvict has the kubelet evict victim, which holds held bytes of
// memory above its request, the way it does under node memory pressure:
// the kubelet restarted with a memory.available threshold (the operator's
// --eviction-hard) that only this pod's memory crosses, then, once the
// victim is evicted, restarted without it. It returns the victim's last
// state. On a shared machine other processes may lift the pressure before
// the kubelet acts; the threshold is then taken again, up to three times.
func (b *Bed) PressureEvict(t testing.TB, h *History, victim *corev1.Pod, held int64) *corev1.Pod {
	t.Helper()
	Eventually(t, 60*time.Second, "the victim's memory resident", func() error {
		used, err := PodMemory(victim)
		if err == nil && used < held*9/10 {
			err = fmt.Errorf("pod %s uses %d MiB of the %d it holds", victim.Name, used>>20, held>>20)
		}
		return err
	})
	defer func() {
		if err := b.RestartKubelet(NoPressure); err != nil {
			t.Fatalf("restarting the kubelet without pressure: %v", err)
		}
	}()
	var last error
	for range 3 {
		threshold, err := PressureThreshold(held)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("kubelet restarted with --eviction-hard=memory.available<%s", threshold)
		if err := b.RestartKubelet(threshold); err != nil {
			t.Fatal(err)
		}
		last = Poll(context.Background(), 90*time.Second, func() error {
			if p := h.Last(victim.UID); p != nil && Evicted(p) {
				return nil
			}
			return fmt.Errorf("%s not evicted", victim.Name)
		})
		if last == nil {
			return h.Last(victim.UID)
		}
	}
	t.Fatalf("the kubelet did not evict %s under memory pressure: %v (kubelet log: %s)", victim.Name, last, b.logPath("kubelet"))
	return nil
}
