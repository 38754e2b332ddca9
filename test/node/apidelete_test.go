package node

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/capo-net/capo/test/nodebed"
	"github.com/capo-net/capo/test/testbed"
)

// `kubectl delete pod` and `kubectl drain` (the Eviction API) take a
// StatefulSet pod away through the API server: the kubelet tears its
// sandbox down, capo reserves its address, and the StatefulSet's new pod of
// the same name gets that address back (returnAddress: sameNode, the
// default), allocated to it and no longer reserved.
func TestKubectlDeleteAndDrainReserve(t *testing.T) {
	ctx := context.Background()
	pool, cidr := bed.NewPool(t, 28)
	ns := bed.Namespace(t, "apidelete", pool, true)
	bed.OptIn(t)
	bed.StatefulSet(t, ns, "kafka", 2, nodebed.Workload{ExitOnTerm: 143})
	pods := bed.WaitRunning(t, ns, "app=kafka", 2)

	t.Run("kubectl delete pod", func(t *testing.T) {
		old := pods["kafka-0"]
		returns := agentMetric(t, returnsMetric, returnedOutcome)
		if _, err := bed.Kubectl(ctx, "-n", ns, "delete", "pod", old.Name, "--timeout=90s"); err != nil {
			t.Fatal(err)
		}
		heldOrReturned(t, cidr, old, returns)
		returned(t, ns, old, cidr)
	})
	t.Run("kubectl drain", func(t *testing.T) {
		old := pods["kafka-1"]
		returns := agentMetric(t, returnsMetric, returnedOutcome)
		t.Cleanup(func() {
			if _, err := bed.Kubectl(ctx, "uncordon", bed.NodeName); err != nil {
				t.Error(err)
			}
		})
		// Only this test's pods: drain evicts through the Eviction API, the
		// way an operator empties a node, and waits until they are gone.
		if _, err := bed.Kubectl(ctx, "drain", bed.NodeName, "--pod-selector=app=kafka,statefulset.kubernetes.io/pod-name=kafka-1",
			"--ignore-daemonsets", "--timeout=90s"); err != nil {
			t.Fatal(err)
		}
		heldOrReturned(t, cidr, old, returns)
		if _, err := bed.Kubectl(ctx, "uncordon", bed.NodeName); err != nil {
			t.Fatal(err)
		}
		returned(t, ns, old, cidr)
	})
}

const (
	returnsMetric   = "capo_agent_address_returns_total"
	returnedOutcome = `outcome="returned"`
)

// heldOrReturned waits until old's address is reserved for it, or has
// already been given back to its successor: the agent counts a return only
// of an address it found reserved, so either way the teardown reserved it.
func heldOrReturned(t *testing.T, cidr *net.IPNet, old *corev1.Pod, returnsBefore float64) {
	t.Helper()
	nodebed.Eventually(t, 30*time.Second, old.Name+"'s old address held", func() error {
		err := bed.Held(context.Background(), cidr, old.Status.PodIP, old)
		if err != nil {
			if text, merr := nodebed.AgentMetrics(); merr == nil && testbed.SumMetric(text, returnsMetric, returnedOutcome) > returnsBefore {
				return nil
			}
		}
		return err
	})
}

// returned waits for the StatefulSet's new pod of old's name and checks it
// got old's address back: allocated to it, its reservation gone.
func returned(t *testing.T, ns string, old *corev1.Pod, cidr *net.IPNet) {
	t.Helper()
	var now *corev1.Pod
	nodebed.Eventually(t, 90*time.Second, "the replacement "+old.Name, func() error {
		now = bed.Pod(ns, old.Name)
		if now == nil || now.UID == old.UID || now.Status.Phase != corev1.PodRunning || now.Status.PodIP == "" {
			return fmt.Errorf("no running replacement for %s yet", old.Name)
		}
		return nil
	})
	if now.Status.PodIP != old.Status.PodIP {
		t.Fatalf("the new %s got %s, not its own address %s back", old.Name, now.Status.PodIP, old.Status.PodIP)
	}
	ctx := context.Background()
	if err := bed.AllocatedTo(ctx, cidr, now.Status.PodIP, now); err != nil {
		t.Fatal(err)
	}
	nodebed.Eventually(t, 30*time.Second, old.Status.PodIP+"'s reservation ended as returned", func() error {
		reserved, err := bed.Reserved(ctx)
		if err == nil && reserved[old.Status.PodIP] {
			err = fmt.Errorf("%s still reserved", old.Status.PodIP)
		}
		return err
	})
}
