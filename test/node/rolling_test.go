package node

import (
	"context"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/capo-net/capo/test/nodebed"
)

// A rolling update of the agent DaemonSet (the same image under a second
// tag, as a release upgrade would roll it) while a StatefulSet's pods are
// deleted and re-created one after another: every address any of them
// had is, at the end, either still allocated to that very pod or held for
// it, never handed to another.
func TestRollingUpdateUnderChurnLosesNothing(t *testing.T) {
	ctx := context.Background()
	pool, cidr := bed.NewPool(t, 26)
	ns := bed.Namespace(t, "rolling", pool, true)
	bed.OptIn(t)
	h := bed.WatchPods(t, ns)
	bed.StatefulSet(t, ns, "cass", 6, nodebed.Workload{})
	bed.WaitRunning(t, ns, "app=cass", 6)

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var deleted atomic.Int32
	var maxJournal int
	wg.Add(1)
	go func() {
		defer wg.Done()
		maxJournal = churn(ctx, ns, &deleted, stop)
	}()
	wg.Add(1)
	go func() {
		defer wg.Done()
		burstWhenAgentStops(ctx, ns, &deleted, stop)
	}()
	t.Cleanup(func() {
		if err := bed.UpgradeChart(ctx, nodebed.CapoTags[0]); err != nil {
			t.Error(err)
		}
	})
	if err := bed.UpgradeChart(ctx, nodebed.CapoTags[1]); err != nil {
		close(stop)
		wg.Wait()
		t.Fatal(err)
	}
	atUpdate := deleted.Load()
	nodebed.Eventually(t, 30*time.Second, "three more teardowns under the new agent", func() error {
		if n := deleted.Load(); n < atUpdate+3 && n < maxChurn {
			return fmt.Errorf("%d deleted", n)
		}
		return nil
	})
	close(stop)
	wg.Wait()
	replayed := agentMetric(t, "capo_agent_del_decisions_total", `path="journal"`)
	t.Logf("%d pods deleted, %d before the update finished; the journal held up to %d teardowns, the new agent replayed %v",
		deleted.Load(), atUpdate, maxJournal, replayed)
	if replayed == 0 {
		t.Errorf("no teardown fell in the update's window without an agent: the test did not test the update")
	}

	current := bed.WaitRunning(t, ns, "app=cass", 6)
	nodebed.Eventually(t, 90*time.Second, "every address of every incarnation allocated to it or held for it", func() error {
		if p, err := nodebed.StateDir.Pending(); err != nil || len(p) > 0 {
			return fmt.Errorf("journal not drained yet (%d records, %v)", len(p), err)
		}
		return accounted(ctx, h, current, cidr)
	})
}

// maxChurn bounds the deletions: each holds an address of the 64 for the TTL.
const maxChurn = 40

// churn deletes one running pod of ns about every second until stop, and
// returns the journal's greatest depth seen meanwhile.
func churn(ctx context.Context, ns string, deleted *atomic.Int32, stop chan struct{}) (maxJournal int) {
	grace := int64(1)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for deleted.Load() < maxChurn {
		select {
		case <-stop:
			return maxJournal
		case <-tick.C:
		}
		if p, _ := nodebed.StateDir.Pending(); len(p) > maxJournal {
			maxJournal = len(p)
		}
		pods, err := bed.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=cass"})
		if err != nil {
			continue
		}
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
				if bed.Kube.CoreV1().Pods(ns).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &grace}) == nil {
					deleted.Add(1)
				}
				break
			}
		}
	}
	return maxJournal
}

// accounted checks every address every pod of h ever had.
func accounted(ctx context.Context, h *nodebed.History, current map[string]*corev1.Pod, cidr *net.IPNet) error {
	for _, p := range h.Pods() {
		for _, ip := range h.IPs(p.UID) {
			if now := current[p.Name]; now != nil && now.UID == p.UID && now.Status.PodIP == ip {
				if err := bed.AllocatedTo(ctx, cidr, ip, now); err != nil {
					return err
				}
				continue
			}
			if err := bed.Held(ctx, cidr, ip, p); err != nil {
				return err
			}
		}
	}
	return nil
}

// burstWhenAgentStops deletes three running pods the moment the old agent
// pod starts terminating, so their teardowns fall in the update's window.
func burstWhenAgentStops(ctx context.Context, ns string, deleted *atomic.Int32, stop chan struct{}) {
	tick := time.NewTicker(nodebed.PollInterval)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		agents, err := bed.Kube.CoreV1().Pods(nodebed.Namespace).List(ctx, metav1.ListOptions{LabelSelector: nodebed.AgentSelector})
		if err != nil || len(agents.Items) == 0 || agents.Items[0].DeletionTimestamp == nil {
			continue
		}
		pods, err := bed.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=cass"})
		if err != nil {
			continue
		}
		grace, n := int64(1), 0
		for _, p := range pods.Items {
			if n < 3 && p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil &&
				bed.Kube.CoreV1().Pods(ns).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &grace}) == nil {
				deleted.Add(1)
				n++
			}
		}
		return
	}
}
