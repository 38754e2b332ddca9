package node

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/capo-net/capo/test/nodebed"
)

// victimMiB is what the victim holds: far above its request, so the
// kubelet ranks it first, and large enough that the pressure threshold
// tolerates other processes on a shared machine moving memory by half of
// it (PressureEvict takes the threshold again if they move more); small
// enough to leave a busy machine's other users their memory.
const victimMiB = 1024

// A real kubelet node-pressure eviction of a StatefulSet pod on a full
// pool: the kubelet evicts the pod (no API call), containerd runs the CNI
// DEL, capo reserves the address, and the StatefulSet's new pod does not
// get it. Both ways an eviction ends, by the container's exit status. The
// StatefulSet opts out of getting its address back: a returning redis-1
// would take its 1 GiB again under the same pressure (sandbox_test.go and
// apidelete_test.go prove the return on this node).
func TestKubeletEvictionReserves(t *testing.T) {
	for _, tc := range []struct {
		name     string
		exitCode int
		outcome  func(*corev1.Pod) error
	}{
		{"exit 1 on SIGTERM: Failed, Evicted", 1, func(p *corev1.Pod) error {
			if p.Status.Phase != corev1.PodFailed || p.Status.Reason != "Evicted" {
				return fmt.Errorf("phase %s reason %q, want Failed/Evicted", p.Status.Phase, p.Status.Reason)
			}
			return nil
		}},
		// The kubelet records the phase its eviction sets (Failed) or the
		// one the container's exit gives (Succeeded), whichever status it
		// writes first (the eviction's, before the container's state is
		// in, on this machine now); a container status it wrote says 0.
		{"exit 0 on SIGTERM: Succeeded, DisruptionTarget", 0, func(p *corev1.Pod) error {
			if !nodebed.DisruptedByKubelet(p) || exitOf(p) > 0 || p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
				return fmt.Errorf("phase %s, exit %d, conditions %v, want the container's exit 0, a terminal phase and DisruptionTarget/TerminationByKubelet", p.Status.Phase, exitOf(p), p.Status.Conditions)
			}
			return nil
		}},
	} {
		t.Run(tc.name, func(t *testing.T) { evictionCase(t, tc.exitCode, tc.outcome) })
	}
}

// exitOf is the pod's first container's exit status, -1 while the
// kubelet has written none.
func exitOf(p *corev1.Pod) int32 {
	for _, c := range p.Status.ContainerStatuses {
		if t := c.State.Terminated; t != nil {
			return t.ExitCode
		}
	}
	return -1
}

func evictionCase(t *testing.T, exitCode int, outcome func(*corev1.Pod) error) {
	ctx := context.Background()
	if err := bed.EnsurePriorityClasses(ctx); err != nil {
		t.Fatal(err)
	}
	pool, cidr := bed.NewPool(t, 29) // 8 addresses: 4 redis, 4 web
	ns := bed.Namespace(t, fmt.Sprintf("evict-%d", exitCode), pool, true)
	bed.OptIn(t)
	h := bed.WatchPods(t, ns)
	bed.StatefulSet(t, ns, "redis", 4, nodebed.Workload{ExitOnTerm: exitCode, AllocMiB: victimMiB, AllocOn: "redis-1", Request: "32Mi", NoReturn: true})
	bed.Deployment(t, ns, "web", 4, nodebed.Workload{Request: "32Mi", PriorityClass: nodebed.HighPriority})
	before := bed.WaitRunning(t, ns, "app in (redis,web)", 8)
	victim := before["redis-1"]
	ip := victim.Status.PodIP

	last := bed.PressureEvict(t, h, victim, victimMiB<<20)
	if err := outcome(last); err != nil {
		t.Fatalf("evicted %s: %v", victim.Name, err)
	}
	t.Logf("evicted %s: phase %s, reason %q, container exit %d", victim.Name, last.Status.Phase, last.Status.Reason, exitOf(last))
	nodebed.Eventually(t, 30*time.Second, "the evicted pod's address held", func() error { return bed.Held(ctx, cidr, ip, victim) })
	for name, p := range before {
		if now := h.Last(p.UID); name != victim.Name && (now == nil || now.Status.Phase != corev1.PodRunning || now.DeletionTimestamp != nil) {
			t.Errorf("%s was disturbed too (%v): only the ranked victim may be evicted", name, now.Status)
		}
	}

	// The StatefulSet's new redis-1 finds the pool full: the only free
	// address is the reserved one, which Calico does not hand out.
	nodebed.Eventually(t, 2*time.Minute, "the new redis-1 refused an address", func() error {
		p := bed.Pod(ns, "redis-1")
		if p == nil || p.UID == victim.UID {
			return fmt.Errorf("no new redis-1 yet")
		}
		if p.Status.PodIP != "" {
			return fmt.Errorf("the new redis-1 got %s", p.Status.PodIP)
		}
		for _, ev := range bed.PodEvents(ns, string(p.UID)) {
			if strings.HasPrefix(ev, "FailedCreatePodSandBox") {
				return nil
			}
		}
		return fmt.Errorf("no failed sandbox for the new redis-1 yet")
	})
	if err := bed.Held(ctx, cidr, ip, victim); err != nil {
		t.Fatal(err)
	}
}
