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
// it, never handed to another. The second tag reaches the node only after
// the old agent is gone, as a slow pull would: the teardowns in between
// find no agent and go through the journal.
func TestRollingUpdateUnderChurnLosesNothing(t *testing.T) {
	ctx := context.Background()
	pool, cidr := bed.NewPool(t, 26)
	ns := bed.Namespace(t, "rolling", pool, true)
	bed.OptIn(t)
	h := bed.WatchPods(t, ns)
	bed.StatefulSet(t, ns, "cass", 6, nodebed.Workload{})
	bed.WaitRunning(t, ns, "app=cass", 6)
	old, err := bed.AgentPod(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// An agent pod of an earlier test's second node, still bound to it,
	// would count against maxUnavailable and hold this node's update.
	nodebed.Eventually(t, 30*time.Second, "one agent pod, on this node", func() error {
		pods, err := bed.Kube.CoreV1().Pods(nodebed.Namespace).List(ctx, metav1.ListOptions{LabelSelector: nodebed.AgentSelector})
		if err == nil && len(pods.Items) != 1 {
			err = fmt.Errorf("capo-agent pods: %s", bed.PodsSummary(nodebed.Namespace, nodebed.AgentSelector))
		}
		return err
	})

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var deleted atomic.Int32
	wg.Add(1)
	go func() { defer wg.Done(); churn(ctx, ns, &deleted, stop) }()
	defer func() { close(stop); wg.Wait() }()
	t.Cleanup(func() {
		if err := bed.UpgradeChart(ctx, nodebed.CapoTags[0]); err != nil {
			t.Error(err)
		}
	})
	if err := bed.ApplyChart(ctx, nodebed.CapoTags[1]); err != nil {
		t.Fatal(err)
	}
	nodebed.Eventually(t, 60*time.Second, "the old agent pod gone", func() error {
		if p := bed.Pod(nodebed.Namespace, old.Name); p != nil {
			return fmt.Errorf("%s still there (%s, deleting since %v); capo pods: %s", old.Name, p.Status.Phase, p.DeletionTimestamp, bed.PodsSummary(nodebed.Namespace, nodebed.AgentSelector))
		}
		return nil
	})
	deleteRunning(ctx, ns, 3, &deleted)
	journaled := 0
	nodebed.Eventually(t, 30*time.Second, "teardowns journaled while no agent runs", func() error {
		p, err := nodebed.StateDir.Pending()
		if journaled = len(p); err == nil && journaled == 0 {
			err = fmt.Errorf("nothing journaled")
		}
		return err
	})
	if err := bed.ImportCapoTag(nodebed.CapoTags[1]); err != nil {
		t.Fatal(err)
	}
	if err := bed.WaitCapoReady(ctx, nodebed.CapoTags[1]); err != nil {
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
	stop = make(chan struct{}) // for the deferred close

	current := bed.WaitRunning(t, ns, "app=cass", 6)
	nodebed.Eventually(t, 90*time.Second, "every address of every incarnation allocated to it or held for it", func() error {
		if p, err := nodebed.StateDir.Pending(); err != nil || len(p) > 0 {
			return fmt.Errorf("journal not drained yet (%d records, %v)", len(p), err)
		}
		return accounted(ctx, h, current, cidr)
	})
	replayed := agentMetric(t, "capo_agent_del_decisions_total", `path="journal"`)
	t.Logf("%d pods deleted, %d before the new agent ran; at least %d teardowns journaled meanwhile, %v replayed by the new agent",
		deleted.Load(), atUpdate, journaled, replayed)
	if replayed < float64(journaled) {
		t.Errorf("the new agent replayed %v of the %d journaled teardowns", replayed, journaled)
	}
}

// maxChurn bounds the deletions: each holds an address of the 64 for the TTL.
const maxChurn = 40

// churn deletes one running pod of ns about every second until stop.
func churn(ctx context.Context, ns string, deleted *atomic.Int32, stop chan struct{}) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for deleted.Load() < maxChurn {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		deleteRunning(ctx, ns, 1, deleted)
	}
}

// deleteRunning deletes up to n running pods of ns.
func deleteRunning(ctx context.Context, ns string, n int, deleted *atomic.Int32) {
	pods, err := bed.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=cass"})
	if err != nil {
		return
	}
	grace := int64(1)
	for _, p := range pods.Items {
		if n > 0 && p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil &&
			bed.Kube.CoreV1().Pods(ns).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &grace}) == nil {
			deleted.Add(1)
			n--
		}
	}
}

// accounted checks every address every pod of h ever had.
func accounted(ctx context.Context, h *nodebed.History, current map[string]*corev1.Pod, cidr *net.IPNet) error {
	for _, p := range h.Pods() {
		for _, ip := range h.IPs(p.UID) {
			// The current pod of the name holds it: its own, or given back
			// to a later incarnation of the same StatefulSet member.
			if now := current[p.Name]; now != nil && now.Status.PodIP == ip {
				if err := bed.AllocatedTo(ctx, cidr, ip, now); err != nil {
					return err
				}
				continue
			}
			// Given back to a later incarnation of the member: its record,
			// or its own current address, is that incarnation's to account
			// for (the last incarnation that had it holds it).
			if h.LaterWith(p, ip) != nil {
				continue
			}
			if err := bed.Held(ctx, cidr, ip, p); err != nil {
				return err
			}
		}
	}
	return nil
}
