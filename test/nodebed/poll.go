package nodebed

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
)

// PollInterval is how often Poll and Eventually look again.
const PollInterval = 100 * time.Millisecond

// Poll calls cond until it returns nil, limit passes, or ctx ends; the
// error then carries cond's last answer, which says what was still wrong.
func Poll(ctx context.Context, limit time.Duration, cond func() error) error {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	t := time.NewTicker(PollInterval)
	defer t.Stop()
	for {
		err := cond()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("after %s: %w", limit, err)
		case <-t.C:
		}
	}
}

// Eventually is Poll for tests: it fails the test naming what was awaited
// and why it was not reached.
func Eventually(t testing.TB, limit time.Duration, what string, cond func() error) {
	t.Helper()
	if err := Poll(context.Background(), limit, cond); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

// History remembers every state of every pod of a namespace it has seen,
// by UID: a pod's last status before its controller deletes it (an
// evicted StatefulSet pod is gone within milliseconds), and every address
// each incarnation had.
type History struct {
	mu    sync.Mutex
	last  map[types.UID]*corev1.Pod
	ips   map[types.UID][]string
	first map[types.UID]int // the order pods were first seen in
}

// WatchPods records the pods of ns until the test ends.
func (b *Bed) WatchPods(t testing.TB, ns string) *History {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w, err := b.Kube.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	h := &History{last: map[types.UID]*corev1.Pod{}, ips: map[types.UID][]string{}, first: map[types.UID]int{}}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			if p, ok := ev.Object.(*corev1.Pod); ok && ev.Type != watch.Error {
				h.record(p)
			}
		}
	}()
	t.Cleanup(func() { cancel(); w.Stop(); <-done })
	return h
}

func (h *History) record(p *corev1.Pod) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, seen := h.first[p.UID]; !seen {
		h.first[p.UID] = len(h.first)
	}
	h.last[p.UID] = p.DeepCopy()
	if ip := p.Status.PodIP; ip != "" {
		if ips := h.ips[p.UID]; len(ips) == 0 || ips[len(ips)-1] != ip {
			h.ips[p.UID] = append(ips, ip)
		}
	}
}

// Last is the last state seen of the pod with uid, or nil.
func (h *History) Last(uid types.UID) *corev1.Pod {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.last[uid]
}

// Pods are the last states of every pod seen.
func (h *History) Pods() []*corev1.Pod {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]*corev1.Pod, 0, len(h.last))
	for _, p := range h.last {
		out = append(out, p)
	}
	return out
}

// LaterWith is the first incarnation of p's name seen after p that had
// ip too (a StatefulSet member's address given back to its successor),
// or nil.
func (h *History) LaterWith(p *corev1.Pod, ip string) *corev1.Pod {
	h.mu.Lock()
	defer h.mu.Unlock()
	var later *corev1.Pod
	for uid, q := range h.last {
		if q.Namespace != p.Namespace || q.Name != p.Name || h.first[uid] <= h.first[p.UID] || !slices.Contains(h.ips[uid], ip) {
			continue
		}
		if later == nil || h.first[uid] < h.first[later.UID] {
			later = q
		}
	}
	return later
}

// IPs are the addresses the pod with uid has had, in order.
func (h *History) IPs(uid types.UID) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.ips[uid]...)
}
