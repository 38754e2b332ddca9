package node

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/capo-net/capo/test/nodebed"
	"github.com/capo-net/capo/test/testbed"
)

// The previous release (its chart and image, built from its commit and
// cached) installed, then `helm upgrade` to this one, then `helm rollback`
// to it. Before each switch there are reservations held (a StatefulSet
// whose pods opt out of getting their address back), a return done, and
// ADD records on the host; during each switch the new agent's image
// arrives only after the old agent is gone, so teardowns in between are
// journaled by the other release's capo-ipam. After each switch: the
// journal drains, every address any pod ever had is allocated to its pod
// or held for it, and a returning pod gets its address back.
func TestUpgradeAndRollback(t *testing.T) {
	ctx := context.Background()
	stamp := time.Now().Format("150405")
	upTag, backTag := "up-"+stamp, nodebed.PreviousTag+"-back-"+stamp // imported only once the agent before is gone
	testbed.SkipWithoutPrevious(t, bed.ImportPreviousImage(t.Logf))
	previous := render(t, func() ([]byte, error) { return nodebed.RenderPrevious(t.Logf, nodebed.PreviousTag) })
	rolledBack := render(t, func() ([]byte, error) { return nodebed.RenderPrevious(t.Logf, backTag) })
	upgraded := render(t, func() ([]byte, error) { return nodebed.RenderCurrent(upTag) })

	uninstallForThisTest(t)
	installed := []byte(nil)
	t.Cleanup(func() { // before the reinstall uninstallForThisTest arranges
		if err := bed.SwitchRelease(ctx, installed, nil); err != nil {
			t.Error(err)
		}
		if err := bed.WaitCapoGone(ctx); err != nil {
			t.Error(err)
		}
	})
	if err := bed.SwitchRelease(ctx, nil, previous); err != nil {
		t.Fatal(err)
	}
	installed = previous
	if err := bed.WaitCapoReady(ctx, nodebed.PreviousTag); err != nil {
		t.Fatalf("%s installed: %v\n%s", testbed.PreviousRelease, err, bed.Diagnose(ctx))
	}
	runs(t, testbed.PreviousRelease)
	u := newUpgradeRun(t)

	// Under the previous release.
	u.holdAndReturn(t, "zk-0", "kafka-0")
	if recs, err := nodebed.StateDir.AddrRecords(); err != nil || len(recs) < 7 {
		t.Fatalf("%d ADD records written by %s's capo-ipam, want one per pod (%v)", len(recs), testbed.PreviousRelease, err)
	}

	t.Run("helm upgrade", func(t *testing.T) {
		u.switchTo(t, previous, upgraded, func() error { return bed.ImportCapoTag(upTag) }, upTag)
		installed = upgraded
		runs(t, nodebed.CapoVersion)
		u.holdAndReturn(t, "zk-2", "kafka-2")
	})
	t.Run("helm rollback", func(t *testing.T) {
		u.switchTo(t, upgraded, rolledBack, func() error {
			return bed.TagImage(nodebed.CapoRepository+":"+nodebed.PreviousTag, nodebed.CapoRepository+":"+backTag)
		}, backTag)
		installed = rolledBack
		runs(t, testbed.PreviousRelease)
		u.holdAndReturn(t, "zk-0", "kafka-1")
	})
}

// runs checks the release the node's agent runs, by its build info.
func runs(t *testing.T, version string) {
	t.Helper()
	nodebed.Eventually(t, 30*time.Second, "the agent runs "+version, func() error {
		text, err := nodebed.AgentMetrics()
		if err == nil && testbed.SumMetric(text, "capo_build_info", `version="`+version+`"`) != 1 {
			err = fmt.Errorf("capo_build_info{version=%q} absent", version)
		}
		return err
	})
}

func render(t *testing.T, f func() ([]byte, error)) []byte {
	t.Helper()
	out, err := f()
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// upgradeRun is the workload the upgrade test keeps through both switches.
type upgradeRun struct {
	ns   string
	cidr *net.IPNet
	h    *nodebed.History
}

func newUpgradeRun(t *testing.T) *upgradeRun {
	pool, cidr := bed.NewPool(t, 26)
	ns := bed.Namespace(t, "upgrade", pool, true)
	bed.OptIn(t)
	u := &upgradeRun{ns: ns, cidr: cidr, h: bed.WatchPods(t, ns)}
	bed.StatefulSet(t, ns, "kafka", 4, nodebed.Workload{})
	bed.StatefulSet(t, ns, "zk", 3, nodebed.Workload{NoReturn: true})
	u.running(t)
	nodebed.Eventually(t, 30*time.Second, "capo-ipam in the chain", nodebed.CapoInChain)
	return u
}

// running waits for every pod and returns them by name.
func (u *upgradeRun) running(t *testing.T) map[string]*corev1.Pod {
	t.Helper()
	pods := bed.WaitRunning(t, u.ns, "app=kafka", 4)
	for n, p := range bed.WaitRunning(t, u.ns, "app=zk", 3) {
		pods[n] = p
	}
	return pods
}

// holdAndReturn deletes held (whose address stays reserved for it) and
// returning (which gets its address back), one after the other.
func (u *upgradeRun) holdAndReturn(t *testing.T, held, returning string) {
	t.Helper()
	ctx := context.Background()
	cidr := u.cidr
	old := u.recreate(t, held)
	if err := bed.Held(ctx, cidr, old.Status.PodIP, old); err != nil {
		t.Fatal(err)
	}
	old = u.recreate(t, returning)
	nodebed.Eventually(t, 30*time.Second, returning+" back on its address", func() error {
		now := bed.Pod(u.ns, returning)
		if now == nil || now.UID == old.UID || now.Status.PodIP != old.Status.PodIP {
			return fmt.Errorf("%s has %v", returning, now)
		}
		return bed.AllocatedTo(ctx, cidr, old.Status.PodIP, now)
	})
	u.accounted(t)
}

// recreate deletes a pod and waits for its next incarnation to run; it
// returns the deleted one.
func (u *upgradeRun) recreate(t *testing.T, name string) *corev1.Pod {
	t.Helper()
	old := u.delete(t, name)
	nodebed.Eventually(t, 60*time.Second, name+" running again", func() error {
		if p := bed.Pod(u.ns, name); p == nil || p.UID == old.UID || p.Status.Phase != corev1.PodRunning || p.Status.PodIP == "" {
			return fmt.Errorf("not yet")
		}
		return nil
	})
	return old
}

func (u *upgradeRun) delete(t *testing.T, name string) *corev1.Pod {
	t.Helper()
	old := bed.Pod(u.ns, name)
	if old == nil {
		t.Fatalf("no pod %s", name)
	}
	grace := int64(1)
	uid := old.UID
	if err := bed.Kube.CoreV1().Pods(u.ns).Delete(context.Background(), name, metav1.DeleteOptions{GracePeriodSeconds: &grace, Preconditions: &metav1.Preconditions{UID: &uid}}); err != nil {
		t.Fatal(err)
	}
	return old
}

// switchTo goes from one release to another with the new image arriving
// (arrive) only once the old agent is gone; two pods deleted in between
// are journaled, and the new agent replays them.
func (u *upgradeRun) switchTo(t *testing.T, from, to []byte, arrive func() error, tag string) {
	t.Helper()
	ctx := context.Background()
	old, err := bed.AgentPod(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := bed.SwitchRelease(ctx, from, to); err != nil {
		t.Fatal(err)
	}
	nodebed.Eventually(t, 90*time.Second, "the old agent pod gone", func() error {
		if p := bed.Pod(nodebed.Namespace, old.Name); p != nil {
			return fmt.Errorf("%s still there", old.Name)
		}
		return nil
	})
	u.recreate(t, "zk-1")
	u.recreate(t, "kafka-3")
	if p, err := nodebed.StateDir.Pending(); err != nil || len(p) < 2 {
		t.Fatalf("%d teardowns journaled while no agent runs, want 2 (%v)", len(p), err)
	}
	if err := arrive(); err != nil {
		t.Fatal(err)
	}
	if err := bed.WaitCapoReady(ctx, tag); err != nil {
		t.Fatalf("%v\n%s", err, bed.Diagnose(ctx))
	}
	nodebed.Eventually(t, 60*time.Second, "the journal drained", func() error {
		if p, err := nodebed.StateDir.Pending(); err != nil || len(p) > 0 {
			return fmt.Errorf("%d records left (%v)", len(p), err)
		}
		return nil
	})
	u.accounted(t)
}

// accounted: every address every pod of the run ever had is allocated to
// the pod of that name now, or held for the incarnation that had it.
func (u *upgradeRun) accounted(t *testing.T) {
	t.Helper()
	current := u.running(t)
	cidr := u.cidr
	nodebed.Eventually(t, 60*time.Second, "every address allocated to its pod or held for it", func() error {
		return accounted(context.Background(), u.h, current, cidr)
	})
}
