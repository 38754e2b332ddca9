package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/projectcalico/calico/libcalico-go/lib/clientv3"
	"github.com/projectcalico/calico/libcalico-go/lib/options"

	"github.com/capo-net/capo/pkg/reserve"
	"github.com/capo-net/capo/pkg/reserve/calicostore"
	"github.com/capo-net/capo/test/testbed"
)

// An agent-like writer and a controller-like releaser hammer one node's
// reservations at once, with objects that hold two addresses, so objects
// are created, emptied and deleted all the time (the per-node layout lost
// 72 of 120 writes this way: its Delete passed a resource version the
// Kubernetes backend ignores). Every address the writer was told is
// reserved, and the releaser did not release, must still be held, and be
// found when the node's reservations are read.
func TestReservationStoreWriterAndReleaserRace(t *testing.T) {
	ds := testbed.Kubernetes
	env := bed.NewEnv(t, ds, testbed.EnvOptions{NoAgent: true})
	small := reserve.Limits{MaxIPs: 2, MaxAnnotationBytes: 1 << 20}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	r := &race{t: t, node: env.Node, added: map[string]bool{}, released: map[string]bool{}, done: make(chan struct{})}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); r.write(ctx, calicostore.New(newCalicoClient(t, ds), small)) }()
	go func() { defer wg.Done(); r.release(ctx, calicostore.New(newCalicoClient(t, ds), small)) }()
	wg.Wait()

	found := map[string]bool{}
	held, err := calicostore.New(env.Calico, small).ListNode(ctx, env.Node)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range held {
		found[e.IP] = true
	}
	inObjects := heldInAnyObject(t, env.Calico)
	var lost, stranded []string
	for ip := range r.added {
		switch {
		case r.released[ip]:
		case !inObjects[ip]:
			lost = append(lost, ip)
		case !found[ip]:
			stranded = append(stranded, ip)
		}
	}
	slices.Sort(lost)
	slices.Sort(stranded)
	t.Logf("%d reserved, %d released by the releaser, %d lost, %d held but not found by a read of the node", len(r.added), len(r.released), len(lost), len(stranded))
	if len(lost) > 0 || len(stranded) > 0 {
		t.Fatalf("lost writes %v; stranded %v", lost, stranded)
	}
}

// race is what the writer was told it added and the releaser released.
type race struct {
	t               *testing.T
	node            string
	mu              sync.Mutex
	added, released map[string]bool
	done            chan struct{} // the writer is through
}

// write is the agent: one teardown after another.
func (r *race) write(ctx context.Context, s reserve.Store) {
	defer close(r.done)
	for i := range 120 {
		ip := fmt.Sprintf("10.249.%d.%d", i/250, i%250+1)
		res, err := s.Reserve(ctx, r.node, []reserve.Entry{entry(ip, time.Now())})
		if err != nil {
			r.t.Errorf("reserve %s: %v", ip, err)
			return
		}
		r.mu.Lock()
		for _, a := range res.Added {
			r.added[a] = true
		}
		r.mu.Unlock()
	}
}

// release is the controller: releases whatever it sees, pass after pass,
// from the pass's listing.
func (r *race) release(ctx context.Context, s reserve.Store) {
	for {
		select {
		case <-r.done:
			return
		default:
		}
		held, err := s.ListNode(ctx, r.node)
		if err == nil {
			_, err = s.List(ctx)
		}
		if err != nil {
			r.t.Errorf("list: %v", err)
			return
		}
		refs := make([]reserve.Ref, 0, len(held))
		for _, e := range held {
			refs = append(refs, e.Ref())
		}
		got, err := s.Release(ctx, refs)
		if err != nil {
			r.t.Errorf("release: %v", err)
			return
		}
		r.mu.Lock()
		for _, ref := range got {
			r.released[ref.IP] = true
		}
		r.mu.Unlock()
	}
}

// newCalicoClient is a client of its own, as another process would have.
func newCalicoClient(t *testing.T, ds testbed.Datastore) clientv3.Interface {
	t.Helper()
	c, err := clientv3.New(*bed.CalicoAPIConfig(ds))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// heldInAnyObject is every address in any IPReservation: what Calico
// enforces, whatever capo can read.
func heldInAnyObject(t *testing.T, c clientv3.Interface) map[string]bool {
	t.Helper()
	list, err := c.IPReservations().List(context.Background(), options.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, r := range list.Items {
		for _, cidr := range r.Spec.ReservedCIDRs {
			ip, _, _ := strings.Cut(cidr, "/")
			out[ip] = true
		}
	}
	return out
}
