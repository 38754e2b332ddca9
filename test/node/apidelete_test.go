package node

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/capo-net/capo/test/nodebed"
)

// `kubectl delete pod` and `kubectl drain` (the Eviction API) take a
// StatefulSet pod away through the API server: the kubelet tears its
// sandbox down, capo reserves its address, and the pod that replaces it
// gets another.
func TestKubectlDeleteAndDrainReserve(t *testing.T) {
	ctx := context.Background()
	pool, cidr := bed.NewPool(t, 28)
	ns := bed.Namespace(t, "apidelete", pool, true)
	bed.OptIn(t)
	bed.StatefulSet(t, ns, "kafka", 2, nodebed.Workload{ExitOnTerm: 143})
	pods := bed.WaitRunning(t, ns, "app=kafka", 2)

	t.Run("kubectl delete pod", func(t *testing.T) {
		old := pods["kafka-0"]
		if _, err := bed.Kubectl(ctx, "-n", ns, "delete", "pod", old.Name, "--timeout=90s"); err != nil {
			t.Fatal(err)
		}
		nodebed.Eventually(t, 30*time.Second, "kafka-0's old address held", func() error { return bed.Held(ctx, cidr, old.Status.PodIP, old) })
		replaced(t, ns, old, cidr)
	})
	t.Run("kubectl drain", func(t *testing.T) {
		old := pods["kafka-1"]
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
		nodebed.Eventually(t, 30*time.Second, "kafka-1's old address held", func() error { return bed.Held(ctx, cidr, old.Status.PodIP, old) })
		if _, err := bed.Kubectl(ctx, "uncordon", bed.NodeName); err != nil {
			t.Fatal(err)
		}
		replaced(t, ns, old, cidr)
	})
}

// replaced waits for the StatefulSet's new pod of old's name and checks it
// got a different address, allocated to it, while old's stays held.
func replaced(t *testing.T, ns string, old *corev1.Pod, cidr *net.IPNet) {
	t.Helper()
	var now *corev1.Pod
	nodebed.Eventually(t, 90*time.Second, "the replacement "+old.Name, func() error {
		now = bed.Pod(ns, old.Name)
		if now == nil || now.UID == old.UID || now.Status.Phase != corev1.PodRunning || now.Status.PodIP == "" {
			return fmt.Errorf("no running replacement for %s yet", old.Name)
		}
		return nil
	})
	if now.Status.PodIP == old.Status.PodIP {
		t.Fatalf("the new %s got the old pod's address %s", old.Name, old.Status.PodIP)
	}
	ctx := context.Background()
	if err := bed.AllocatedTo(ctx, cidr, now.Status.PodIP, now); err != nil {
		t.Fatal(err)
	}
	if err := bed.Held(ctx, cidr, old.Status.PodIP, old); err != nil {
		t.Fatal(err)
	}
}
