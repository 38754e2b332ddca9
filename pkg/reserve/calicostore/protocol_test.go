package calicostore_test

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/projectcalico/calico/libcalico-go/lib/options"

	"github.com/capo-net/capo/pkg/reserve"
	"github.com/capo-net/capo/pkg/reserve/calicostore"
	"github.com/capo-net/capo/pkg/reserve/reservetest"
)

var deleteAny = options.DeleteOptions{}

// eachBackend runs f with the Kubernetes backend's Delete (the resource
// version ignored) and with etcdv3's (honoured).
func eachBackend(t *testing.T, f func(t *testing.T, etcd bool)) {
	for _, etcd := range []bool{false, true} {
		t.Run(map[bool]string{false: "kubernetes", true: "etcdv3"}[etcd], func(t *testing.T) { f(t, etcd) })
	}
}

// once runs f the first time verb reaches name, then gets out of the way.
func once(objs *reservetest.Objects, verb, name string, f func()) {
	var done bool
	objs.Before = func(v, n string) error {
		if v == verb && n == name && !done {
			done = true
			f()
		}
		return nil
	}
}

// An agent writes into an overflow object while the controller empties it,
// at each step of the controller's retire-then-delete. The agent's address
// must survive in every interleaving.
func TestReleaseNeverDeletesAConcurrentWrite(t *testing.T) {
	small := reserve.Limits{MaxIPs: 2, MaxAnnotationBytes: 1 << 20}
	b := calicostore.BucketOf("n1")
	overflow := calicostore.BucketName(b, 1)
	for _, step := range []string{"update", "delete"} {
		t.Run("agent writes before the controller's "+step, func(t *testing.T) {
			eachBackend(t, func(t *testing.T, etcd bool) {
				controller := reservetest.NewStore(small)
				controller.Objects.EtcdDelete = etcd
				agent := controller.Clone(small)
				mustReserve(t, agent, "n1", "10.0.0.1", "10.0.0.2", "10.0.0.3") // the head is full, 10.0.0.3 in overflow 1
				if _, err := controller.List(ctx); err != nil {
					t.Fatal(err)
				}
				once(controller.Objects, step, overflow, func() { mustReserve(t, agent, "n1", "10.0.0.9") })
				rel, err := controller.Release(ctx, []reserve.Ref{{Node: "n1", IP: "10.0.0.3"}})
				controller.Objects.Before = nil
				if err != nil || len(rel) != 1 {
					t.Fatalf("released %v %v", rel, err)
				}
				if got := nodeIPs(t, agent, "n1"); !slices.Equal(got, []string{"10.0.0.1", "10.0.0.2", "10.0.0.9"}) {
					t.Fatalf("n1 holds %v: the agent's 10.0.0.9 was lost", got)
				}
			})
		})
	}
}

// A writer that finds a retired head (its deleter stopped before deleting
// it) deletes it and writes a new one.
func TestRetiredHeadIsReplaced(t *testing.T) {
	s := reservetest.NewStore(reserve.DefaultLimits)
	head := calicostore.BucketName(calicostore.BucketOf("n1"), 0)
	s.Objects.Put(reservetest.Object{
		Name: head, Labels: map[string]string{calicostore.ManagedByLabel: calicostore.ManagedBy},
		Annotations: map[string]string{calicostore.MetadataAnnotation: "retired"},
	})
	mustReserve(t, s, "n1", "10.0.0.1")
	if o, _ := s.Objects.Object(head); !slices.Equal(o.CIDRs, []string{"10.0.0.1/32"}) {
		t.Fatalf("head %+v", o)
	}
}

// One object that does not decode is skipped and counted; the rest is
// listed and released, and its own node still reserves.
func TestUnreadableObjectIsSkippedNotFatal(t *testing.T) {
	s := reservetest.NewStore(reserve.DefaultLimits)
	mustReserve(t, s, "n1", "10.0.0.1")
	mustReserve(t, s, "n2", "10.0.0.2")
	b := calicostore.BucketOf("n1")
	head := calicostore.BucketName(b, 0)
	o, _ := s.Objects.Object(head)
	o.Annotations[calicostore.MetadataAnnotation] = "z2:garbage"
	o.CIDRs = append(o.CIDRs, "10.9.9.9/32")
	s.Objects.Put(o)

	l, err := s.List(ctx)
	if err != nil || len(l.Unreadable) != 1 || l.Unreadable[0].Object != head || l.Unreadable[0].Addresses != 2 {
		t.Fatalf("listing %+v %v", l, err)
	}
	if rel, err := s.Release(ctx, []reserve.Ref{{Node: "n2", IP: "10.0.0.2"}, {Node: "n1", IP: "10.0.0.1"}}); err != nil || len(rel) != 1 {
		t.Fatalf("released %v %v: want n2's, and n1's left in the unreadable object", rel, err)
	}
	res := mustReserve(t, s, "n1", "10.0.0.5", "10.9.9.9")
	if !slices.Equal(res.Added, []string{"10.0.0.5"}) || !slices.Equal(res.AlreadyHeld, []string{"10.9.9.9"}) {
		t.Fatalf("reserve beside an unreadable head: %+v", res)
	}
	after, _ := s.Objects.Object(head)
	if after.Annotations[calicostore.MetadataAnnotation] != "z2:garbage" || len(after.CIDRs) != 2 || after.Annotations[calicostore.OverflowAnnotation] != "1" {
		t.Fatalf("the unreadable head was rewritten: %+v", after)
	}
	if got := nodeIPs(t, s, "n1"); !slices.Equal(got, []string{"10.0.0.5"}) {
		t.Fatalf("n1 holds %v", got)
	}
}

// Twenty agents reserving and releasing at once: every address reserved and
// not released is held at the end (run with -race).
func TestConcurrentWritersAndReleaser(t *testing.T) {
	eachBackend(t, func(t *testing.T, etcd bool) {
		small := reserve.Limits{MaxIPs: 4, MaxAnnotationBytes: 1 << 20}
		base := reservetest.NewStore(small)
		base.Objects.EtcdDelete = etcd
		var mu sync.Mutex
		var wg sync.WaitGroup
		kept := map[reserve.Ref]bool{}
		for n := range 20 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				agent, node := base.Clone(small), fmt.Sprintf("node-%d", n)
				for i := range 6 {
					ip := fmt.Sprintf("10.%d.0.%d", n, i)
					mustReserve(t, agent, node, ip)
					ref := reserve.Ref{Node: node, IP: ip}
					if i%2 == 0 { // the even ones are released again at once
						if _, err := agent.Release(ctx, []reserve.Ref{ref}); err != nil {
							t.Error(err)
						}
						continue
					}
					mu.Lock()
					kept[ref] = true
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		l, err := base.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range l.Entries {
			if !kept[e.Place()] {
				t.Errorf("%v held but released", e.Place())
			}
			delete(kept, e.Place())
		}
		if len(kept) > 0 {
			t.Fatalf("lost: %v", kept)
		}
	})
}

// The controller deletes an emptied overflow object and, before it takes
// it off the head's list, an agent makes it again (the head still lists
// it): the new object must stay listed, or reads of the bucket miss it.
func TestUnlistingNeverStrandsAnObjectMadeAgain(t *testing.T) {
	small := reserve.Limits{MaxIPs: 1, MaxAnnotationBytes: 1 << 20}
	controller := reservetest.NewStore(small)
	agent := controller.Clone(small)
	mustReserve(t, agent, "n1", "10.0.0.1", "10.0.0.2") // 10.0.0.2 alone in overflow 1
	head := calicostore.BucketName(calicostore.BucketOf("n1"), 0)
	once(controller.Objects, "update", head, func() { mustReserve(t, agent, "n1", "10.0.0.9") })
	if _, err := controller.Release(ctx, []reserve.Ref{{Node: "n1", IP: "10.0.0.2"}}); err != nil {
		t.Fatal(err)
	}
	controller.Objects.Before = nil
	if got := nodeIPs(t, agent, "n1"); !slices.Equal(got, []string{"10.0.0.1", "10.0.0.9"}) {
		t.Fatalf("a read of n1 finds %v: 10.0.0.9 is in an object its head does not list", got)
	}
}

// The controller plans a release on its read; before its write, the pod is
// torn down again from another sandbox and the agent renews the entry. The
// controller's write conflicts and is made again on a fresh read: it must
// leave the renewed entry, and report nothing released, so that the next
// pass plans on what is there.
func TestReleaseAfterAConflictKeepsANewerEntry(t *testing.T) {
	eachBackend(t, func(t *testing.T, etcd bool) {
		controller := reservetest.NewStore(reserve.DefaultLimits)
		controller.Objects.EtcdDelete = etcd
		agent := controller.Clone(reserve.DefaultLimits)
		old := entry("10.0.0.3")
		old.Sandbox = "aaaa"
		if _, err := agent.Reserve(ctx, "n1", []reserve.Entry{old, entry("10.0.0.4")}); err != nil {
			t.Fatal(err)
		}
		l, err := controller.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		renewed := old
		renewed.Sandbox, renewed.ReservedAt = "bbbb", t0.Add(time.Minute)
		once(controller.Objects, "update", calicostore.BucketName(calicostore.BucketOf("n1"), 0), func() {
			if _, err := agent.Reserve(ctx, "n1", []reserve.Entry{renewed}); err != nil {
				t.Error(err)
			}
		})
		rel, err := controller.Release(ctx, []reserve.Ref{l.Entries[0].Ref()})
		controller.Objects.Before = nil
		if err != nil || len(rel) != 0 {
			t.Fatalf("released %v %v: the planned entry was replaced before the write", rel, err)
		}
		held, _ := agent.ListNode(ctx, "n1")
		if len(held) != 2 || held[0].Sandbox != "bbbb" || !held[0].ReservedAt.Equal(renewed.ReservedAt) {
			t.Fatalf("n1 holds %+v: the renewed reservation of 10.0.0.3 was dropped", held)
		}
	})
}
