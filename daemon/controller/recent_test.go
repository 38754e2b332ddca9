package controller

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/capo-net/capo/pkg/reserve"
)

// clock is a test's time, moved by hand.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }

func (c *clock) add(d time.Duration) { c.mu.Lock(); defer c.mu.Unlock(); c.t = c.t.Add(d) }

func (b *awayBed) withClock() *clock {
	c := &clock{t: now}
	b.c.now = c.now
	return c
}

// deletePod deletes a selected pod of a covered node and waits until the
// controller has remembered its teardown: the cache drops the pod before
// its handler runs, and a test that moves the clock on before the handler
// has run would date the teardown later than it happened.
func (b *awayBed) deletePod(ns, name string) {
	b.t.Helper()
	before := b.c.coverer.recent.len()
	if err := b.kube.CoreV1().Pods(ns).Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
		b.t.Fatal(err)
	}
	waitFor(b.t, name+"'s teardown remembered", func() bool { return b.c.coverer.recent.len() > before })
}

// A selected pod deleted while its agent hangs but still looks Ready: its
// DEL is journaled, the pod is gone from the cache, and the agent turns
// NotReady only later. The controller covers it then.
func TestDeleteWhileTheAgentLooksReadyIsCoveredWhenItTurnsNotReady(t *testing.T) {
	b := newAwayBed(t)
	clk := b.withClock()
	b.deletePod("kafka", "broker-0")
	if e, ok := b.held("10.0.0.5"); ok {
		t.Fatalf("reserved while the agent looked ready: %+v", e)
	}
	clk.add(30 * time.Second) // the probe fails three times, the kubelet reports it
	b.agentReady(false)
	e, ok := b.held("10.0.0.5")
	if !ok || e.Reason != ReasonAgentAway || e.Pod != "broker-0" || e.PodUID != "u0" || e.OwnerName != "broker" || !e.ReservedAt.Equal(now) {
		t.Fatalf("reservation %+v (held %v)", e, ok)
	}
	if n := testutil.ToFloat64(b.c.metrics.recentCovered.WithLabelValues(ReasonAgentAway)); n != 1 {
		t.Errorf("recent teardowns covered %v", n)
	}
	if n := b.c.coverer.recent.len(); n != 0 {
		t.Errorf("%d still remembered after being covered", n)
	}
}

// What is not covered: a teardown older than the window, an address the
// agent has been through (free, and its reservation holds it), one Calico
// gave to another pod, and one a new pod of the same name now has. A free
// address no reservation holds is covered (TestAgentAwayReservesAnAddressCalicoFreedFirst).
func TestRecentTeardownsThatAreNotCovered(t *testing.T) {
	for name, tc := range map[string]struct {
		age    time.Duration
		holder [2]string // "" : free
		reborn bool
		agent  bool // the agent's reservation holds it
	}{
		"older than the window":       {age: DefaultRecentWindow + time.Second, holder: [2]string{"kafka", "broker-0"}},
		"free: the agent was through": {age: time.Second, agent: true},
		"given to another pod":        {age: time.Second, holder: [2]string{"web", "web-1"}},
		"the pod's successor has it":  {age: time.Second, holder: [2]string{"kafka", "broker-0"}, reborn: true},
	} {
		t.Run(name, func(t *testing.T) {
			b := newAwayBed(t)
			clk := b.withClock()
			b.deletePod("kafka", "broker-0")
			b.ipam.mu.Lock()
			delete(b.ipam.by, "10.0.0.5")
			b.ipam.mu.Unlock()
			if tc.holder[0] != "" {
				b.ipam.set("10.0.0.5", tc.holder[0], tc.holder[1])
			}
			if tc.reborn {
				p := &corev1.Pod{
					ObjectMeta: metav1.ObjectMeta{Namespace: "kafka", Name: "broker-0", UID: "u1", Labels: map[string]string{"brokerId": "0"}},
					Spec:       corev1.PodSpec{NodeName: "n1"}, Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.5", PodIPs: []corev1.PodIP{{IP: "10.0.0.5"}}},
				}
				if _, err := b.kube.CoreV1().Pods("kafka").Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
				waitFor(t, "the successor cached", func() bool { return b.c.caches.pod("kafka", "broker-0") != nil })
			}
			if tc.agent {
				agents := reserve.Entry{IP: "10.0.0.5", Node: "n1", Namespace: "kafka", Pod: "broker-0", PodUID: "u0", Reason: reserve.ReasonCNIDel, ReservedAt: now}
				if _, err := b.store.Reserve(context.Background(), "n1", []reserve.Entry{agents}); err != nil {
					t.Fatal(err)
				}
			}
			clk.add(tc.age)
			b.agentReady(false)
			if e, ok := b.held("10.0.0.5"); ok && e.Reason != reserve.ReasonCNIDel {
				t.Fatalf("reserved %+v", e)
			}
		})
	}
}

// A Node deleted right after its pods: Calico frees its addresses at once,
// and the pods deleted before it are covered too.
func TestNodeDeletedCoversItsRecentTeardowns(t *testing.T) {
	b := newAwayBed(t)
	b.deletePod("kafka", "broker-0")
	if err := b.kube.CoreV1().Nodes().Delete(context.Background(), "n1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e, ok := b.held("10.0.0.5")
	if !ok || e.Reason != reserve.ReasonNodeLost || e.Pod != "broker-0" {
		t.Fatalf("reservation %+v (held %v)", e, ok)
	}
	if n := testutil.ToFloat64(b.c.metrics.recentCovered.WithLabelValues(reserve.ReasonNodeLost)); n != 1 {
		t.Errorf("recent teardowns covered %v", n)
	}
}

// The memory is bounded, by the window and by count, across nodes.
func TestRecentTeardownsAreBounded(t *testing.T) {
	r := &recentTeardowns{}
	at := func(sec int64, node string) lostPod { return lostPod{seen: time.Unix(sec, 0), node: node, pod: node} }
	r.add(at(100, "old"), time.Minute)
	r.add(at(170, "n1"), time.Minute)
	if r.len() != 1 {
		t.Fatalf("remembered %d: the one older than the window is kept", r.len())
	}
	for i := range maxRecent + 5 {
		r.add(at(171, fmt.Sprint("n", i%7)), time.Minute)
	}
	if r.len() != maxRecent {
		t.Fatalf("remembered %d, bound %d", r.len(), maxRecent)
	}
	got := r.take("n3", time.Unix(170, 0))
	if len(got) != 1 {
		t.Fatalf("took %d teardowns of one pod, want them as one", len(got))
	}
	if left := r.len(); left != maxRecent-(maxRecent/7) && left != maxRecent-(maxRecent/7+1) {
		t.Fatalf("%d left after taking n3's", left)
	}
	if again := r.take("n3", time.Unix(0, 0)); len(again) != 0 {
		t.Fatalf("taken twice: %d", len(again))
	}
}

// A pod seen terminating, then deleted, or losing an address before, is
// one teardown, with every address it had.
func TestRecentTeardownsOfOnePodAreOne(t *testing.T) {
	r := &recentTeardowns{}
	lp := func(sec int64, ip string) lostPod {
		return lostPod{seen: time.Unix(sec, 0), node: "n1", pod: "kafka/broker-0", entries: []reserve.Entry{{IP: ip}}}
	}
	r.add(lp(10, "10.0.0.1"), time.Minute)
	r.add(lp(11, "10.0.0.2"), time.Minute)
	r.add(lp(12, "10.0.0.2"), time.Minute)
	got := r.take("n1", time.Unix(0, 0))
	if len(got) != 1 || len(got[0].entries) != 2 || got[0].entries[0].IP != "10.0.0.1" || got[0].entries[1].IP != "10.0.0.2" {
		t.Fatalf("took %+v", got)
	}
}
