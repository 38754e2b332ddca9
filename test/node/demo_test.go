package node

import (
	"context"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/capo-net/capo/test/nodebed"
)

func say(format string, a ...any) { fmt.Printf(format+"\n", a...) }

// brokerMiB is what broker-3 holds, so the kubelet ranks it first.
const brokerMiB = 1024

const (
	plainLabel = "plain Calico"
	capoLabel  = "with capo (opted in)"
)

// TestDemoNode is `make demo-node`: the demo's story on the real node, one
// node before and after opting in, then two nodes with traffic. The Kafka
// brokers are bare pods with a brokerId label, as operators such as
// Strimzi run them: nothing re-creates one the moment it is evicted, so the
// next pod to start is another app's. The redis member is a StatefulSet's:
// it comes back, and capo gives it its address (demo_redis_test.go).
func TestDemoNode(t *testing.T) {
	if os.Getenv("CAPO_DEMO_NODE") == "" {
		t.Skip("the story `make demo-node` tells; TestKubeletEvictionReserves and TestTrafficFollowsTheReturnedAddress check the same ground")
	}
	if err := bed.EnsurePriorityClasses(context.Background()); err != nil {
		t.Fatal(err)
	}
	say("\ncapo demo on a real node: a kubelet, containerd and runc, Calico v3.31.0's CNI as calico-node installs it,")
	say("and capo from its image, run by the chart's DaemonSet and Deployment. One node, an 8-address Calico pool,")
	say("full: 4 Kafka broker pods (label brokerId) and 4 web pods. First as plain Calico, then opted in to capo.")
	say("Then a second node joins, and a client there keeps talking to a redis StatefulSet member on the first node")
	say("while the kubelet evicts the member and the StatefulSet brings it back.")
	pool, cidr := bed.NewPool(t, 29)
	ns := bed.Namespace(t, "kafka", pool, true)
	h := bed.WatchPods(t, ns)
	bed.Deployment(t, ns, "web", 4, nodebed.Workload{PriorityClass: nodebed.HighPriority})
	for i := range 4 {
		broker(t, ns, i)
	}
	bed.WaitRunning(t, ns, "app in (kafka,web)", 8)

	say("\n1. The kubelet evicts broker-3 under memory pressure: no API call, the pod object stays, containerd runs")
	say("   the CNI DEL. An admission webhook never sees it. Then a new web pod starts.")
	plain := evict(t, h, ns, cidr, plainLabel)
	web0 := bed.WaitRunning(t, ns, "name=web-next-0", 1)["web-next-0"]
	if web0.Status.PodIP != plain {
		t.Fatalf("plain Calico: web-next-0 got %s, not broker-3's %s: the pool was not full", web0.Status.PodIP, plain)
	}
	say("   %-22s web-next-0 got %s at once: broker-3's clients now reconnect to a web pod", plainLabel, plain)
	deletePods(t, ns, "web-next-0", "broker-3") // room for broker-3 to come back

	say("\n2. The operator opts the node in (kubectl annotate node %s capo.io/ip-reserve=enabled) and broker-3", bed.NodeName)
	say("   comes back. The agent pod has put capo-ipam into %s. The kubelet evicts broker-3 again.", nodebed.CNIBinDir)
	bed.OptIn(t)
	broker(t, ns, 3)
	bed.WaitRunning(t, ns, "app in (kafka,web)", 8)
	held := evict(t, h, ns, cidr, capoLabel)
	nodebed.Eventually(t, time.Minute, "web-next-1 to be refused "+held, func() error { return refused(ns, "web-next-1") })
	say("   %-22s web-next-1 waits: %s is held for broker-3 (calico-ipam: no free address in the pool)", capoLabel, held)

	say("\n3. capo-controller releases the reservation when its TTL (set to 8s in its ConfigMap) has passed.")
	setConfig(t, "ipReserveTime: 40m", "ipReserveTime: 8s", "ipReleasePeriod: 5s", "ipReleasePeriod: 1s")
	nodebed.Eventually(t, 3*time.Minute, "web-next-1 to get "+held, func() error {
		if p := bed.Pod(ns, "web-next-1"); p == nil || p.Status.PodIP != held {
			return fmt.Errorf("web-next-1 has no %s yet", held)
		}
		return nil
	})
	say("   %-22s %s released; web-next-1, waiting until now, got it", capoLabel, held)

	back, silent := demoRedis(t)
	// One line, for grep '^verdict:.*PASS$'.
	say("\nverdict: capo kept %s out of reuse after a kubelet eviction; plain Calico handed %s to the next pod at once; "+
		"redis-0 came back to its own %s and a client on the other node reached it again after %.1fs. PASS", held, plain, back, silent.Seconds())
}

// evict has the kubelet evict broker-3 and starts web-next-<n>; it returns
// broker-3's address.
func evict(t *testing.T, h *nodebed.History, ns string, cidr *net.IPNet, label string) string {
	ctx := context.Background()
	victim := bed.Pod(ns, "broker-3")
	ip := victim.Status.PodIP
	last := bed.PressureEvict(t, h, victim, brokerMiB<<20)
	say("   %-22s broker-3 (%s) evicted: %s", label, ip, evictedAs(last))
	if label == capoLabel {
		nodebed.Eventually(t, 30*time.Second, "broker-3's address held", func() error { return bed.Held(ctx, cidr, ip, victim) })
		entries, err := bed.Reservations(ctx)
		if err != nil {
			t.Fatal(err)
		}
		r := entries[ip]
		say("   %-22s %s reserved: pod %s/%s, reason %s, at %s", label, ip, r.Namespace, r.Pod, r.Reason, r.ReservedAt.Format("15:04:05"))
	}
	name := "web-next-0"
	if label == capoLabel {
		name = "web-next-1"
	}
	spec := nodebed.Workload{PriorityClass: nodebed.HighPriority}.PodSpec()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"name": name}}, Spec: spec}
	if _, err := bed.Kube.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return ip
}

// broker starts the bare broker pod broker-<i>; broker-3 holds memory.
func broker(t *testing.T, ns string, i int) {
	name := fmt.Sprintf("broker-%d", i)
	spec := nodebed.Workload{ExitOnTerm: 143, AllocMiB: brokerMiB, AllocOn: "broker-3", Request: "32Mi"}.PodSpec()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": "kafka", "brokerId": fmt.Sprint(i)}}, Spec: spec}
	if _, err := bed.Kube.CoreV1().Pods(ns).Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func deletePods(t *testing.T, ns string, names ...string) {
	ctx := context.Background()
	for _, n := range names {
		if err := bed.Kube.CoreV1().Pods(ns).Delete(ctx, n, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	nodebed.Eventually(t, time.Minute, fmt.Sprintf("%v gone", names), func() error {
		for _, n := range names {
			if _, err := bed.Kube.CoreV1().Pods(ns).Get(ctx, n, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return fmt.Errorf("%s still there", n)
			}
		}
		return nil
	})
}

// refused reports whether the pod's sandbox failed for want of an address.
func refused(ns, name string) error {
	p := bed.Pod(ns, name)
	if p == nil {
		return fmt.Errorf("no pod %s", name)
	}
	if p.Status.PodIP != "" {
		return fmt.Errorf("%s got %s", name, p.Status.PodIP)
	}
	for _, ev := range bed.PodEvents(ns, string(p.UID)) {
		if strings.HasPrefix(ev, "FailedCreatePodSandBox") {
			return nil
		}
	}
	return fmt.Errorf("%s has not failed a sandbox yet", name)
}
