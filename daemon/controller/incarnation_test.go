package controller

import (
	"context"
	"net/netip"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/capo-net/capo/pkg/caliconode"
	"github.com/capo-net/capo/pkg/reserve"
)

const (
	sandboxA = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	sandboxB = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
	sandboxC = "cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc"
)

// calicoAnnotated is p as the calico plugin leaves it on the Kubernetes
// datastore once sandbox id has ip.
func calicoAnnotated(p *corev1.Pod, id, ip string) {
	if p.Annotations == nil {
		p.Annotations = map[string]string{}
	}
	p.Annotations[caliconode.ContainerIDAnnotation], p.Annotations[caliconode.PodIPAnnotation], p.Annotations[caliconode.PodIPsAnnotation] = id, ip+"/32", ip+"/32"
}

// A member's address, taken by its successor (a return) before the
// controller's write for the member reached Calico, is never reserved for
// the member: the entry would name the wrong incarnation, and the
// successor's own teardown would find its address held for another.
func TestCoverageNamesTheIncarnationWhoseSandboxHeldTheAddress(t *testing.T) {
	ip := netip.MustParseAddr("10.0.0.5")
	member := func(uid string, annotate bool) *corev1.Pod {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "kafka", Name: "broker-0", UID: types.UID(uid)},
			Spec:       corev1.PodSpec{NodeName: "n1"}, Status: corev1.PodStatus{Phase: corev1.PodFailed, PodIP: ip.String(), PodIPs: []corev1.PodIP{{IP: ip.String()}}},
		}
		if annotate {
			calicoAnnotated(p, sandboxA, ip.String())
		}
		return p
	}
	for _, tc := range []struct {
		name      string
		annotated bool              // the teardown's pod carries Calico's annotations
		now       func(*corev1.Pod) // the pod object of that name now (nil: deleted)
		holder    string            // the sandbox Calico allocates the address to
		want      *reserve.Entry    // the entry written, nil for none
	}{
		{name: "the member's own sandbox", annotated: true, holder: sandboxA, want: &reserve.Entry{PodUID: "u0", Sandbox: reserve.SandboxOf(sandboxA)}},
		{
			name: "its successor's sandbox", annotated: true, holder: sandboxB,
			now: func(p *corev1.Pod) { p.UID = "u1"; calicoAnnotated(p, sandboxB, "10.0.0.5") },
		},
		{name: "its successor's sandbox, the successor deleted too", annotated: true, holder: sandboxB},
		{
			name: "no annotations, the successor runs with it", holder: sandboxB,
			now: func(p *corev1.Pod) { p.UID, p.Status.Phase = "u1", corev1.PodRunning },
		},
		{
			name: "no annotations, the successor has another address", holder: sandboxA,
			now: func(p *corev1.Pod) {
				p.UID, p.Status.Phase, p.Status.PodIP, p.Status.PodIPs = "u1", corev1.PodRunning, "10.0.0.9", []corev1.PodIP{{IP: "10.0.0.9"}}
			},
			want: &reserve.Entry{PodUID: "", Sandbox: reserve.SandboxOf(sandboxA)},
		},
		{name: "no annotations, no successor", holder: sandboxA, want: &reserve.Entry{PodUID: "u0", Sandbox: reserve.SandboxOf(sandboxA)}},
		{
			name: "an old sandbox of a pod with a new one", holder: sandboxA,
			now: func(p *corev1.Pod) {
				p.Status.Phase, p.Status.PodIP, p.Status.PodIPs = corev1.PodRunning, "10.0.0.9", []corev1.PodIP{{IP: "10.0.0.9"}}
				calicoAnnotated(p, sandboxC, "10.0.0.9")
			},
			want: &reserve.Entry{PodUID: "u0", Sandbox: reserve.SandboxOf(sandboxA)},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newAwayBed(t)
			ctx := context.Background()
			gone := member("u0", tc.annotated)
			if err := b.kube.CoreV1().Pods("kafka").Delete(ctx, "broker-0", metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			if tc.now != nil {
				p := member("u0", false)
				tc.now(p)
				if _, err := b.kube.CoreV1().Pods("kafka").Create(ctx, p, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
				waitFor(t, "the pod of that name now cached", func() bool {
					c := b.c.caches.pod("kafka", "broker-0")
					return c != nil && c.UID == p.UID
				})
			} else {
				waitFor(t, "the pod gone from the cache", func() bool { return b.c.caches.pod("kafka", "broker-0") == nil })
			}
			b.ipam.setSandbox(ip.String(), "kafka", "broker-0", tc.holder)
			kept, err := b.c.coverer.stillTheirs(ctx, podEntries(gone, []netip.Addr{ip}, ReasonAgentAway, time.Now()))
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case tc.want == nil && len(kept) > 0:
				t.Fatalf("reserved %+v for pod UID u0 while sandbox %s holds it", kept[0], tc.holder[:4])
			case tc.want != nil && len(kept) != 1:
				t.Fatalf("kept %+v, want one entry", kept)
			case tc.want != nil && (kept[0].PodUID != tc.want.PodUID || kept[0].Sandbox != tc.want.Sandbox):
				t.Fatalf("kept %+v, want pod UID %q sandbox %q", kept[0], tc.want.PodUID, tc.want.Sandbox)
			}
		})
	}
}

// Of two teardowns of one address queued for a node, the later one is
// written, whatever order they were queued in.
func TestLostQueueKeepsTheLatestTeardownOfAnAddress(t *testing.T) {
	q := newLostQueue()
	t0 := time.Unix(1000, 0)
	later := lostPod{node: "n1", pod: "kafka/broker-0", entries: []reserve.Entry{{IP: "10.0.0.5", PodUID: "u1", ReservedAt: t0.Add(time.Second)}}}
	earlier := lostPod{node: "n1", pod: "kafka/broker-0", entries: []reserve.Entry{{IP: "10.0.0.5", PodUID: "u0", ReservedAt: t0}}}
	q.add(later)
	q.add(earlier)
	if got := q.take("n1"); len(got) != 1 || got[0].PodUID != "u1" {
		t.Fatalf("took %+v, want the successor's entry", got)
	}
	q.add(earlier)
	q.putBack("n1", later.entries)
	if got := q.take("n1"); len(got) != 1 || got[0].PodUID != "u1" {
		t.Fatalf("after a put-back, took %+v, want the successor's entry", got)
	}
}
