package agent

import (
	"context"
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/capo-net/capo/pkg/config"
	"github.com/capo-net/capo/pkg/reserve"
)

// listingStore answers ListNode fresh and List consistently, counting the
// consistent Lists.
type listingStore struct {
	reserve.Store
	entries []reserve.Entry
	lists   int
}

func (s *listingStore) List(context.Context) (*reserve.Listing, error) {
	s.lists++
	return &reserve.Listing{Entries: s.entries}, nil
}

func (s *listingStore) ListNode(_ context.Context, node string) ([]reserve.Entry, error) {
	var out []reserve.Entry
	for _, e := range s.entries {
		if e.Node == node {
			out = append(out, e)
		}
	}
	return out, nil
}

// With sameNode, a return's lookup reads what is held from this node's own
// reservations, fresh, and the other nodes' from the API server's cache,
// without the consistent List; an address also reserved on another node
// for another pod is still seen. A failed cached read falls back to the
// consistent List.
func TestSameNodeLookupReadsItsOwnFreshAndOthersFromTheCache(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "kafka", Name: "kafka-1", UID: "u2"}}
	mine := reserve.Entry{IP: "10.0.0.5", Node: "n1", Namespace: "kafka", Pod: "kafka-1", PodUID: "u2"}
	other := reserve.Entry{IP: "10.0.0.5", Node: "n2", Namespace: "zoo", Pod: "zk-0", PodUID: "z0"}
	store := &listingStore{entries: []reserve.Entry{mine}}
	cachedReads := 0
	o := &offerer{node: "n1", store: store, cached: func(context.Context) (*reserve.Listing, error) {
		cachedReads++
		return &reserve.Listing{Entries: []reserve.Entry{mine, other}}, nil
	}}
	held, all, err := o.lookup(context.Background(), config.ReturnSameNode, pod)
	if err != nil {
		t.Fatal(err)
	}
	if store.lists != 0 || cachedReads != 1 {
		t.Fatalf("%d consistent Lists and %d cached reads, want 0 and 1", store.lists, cachedReads)
	}
	if len(held) != 1 || held[0] != mine {
		t.Fatalf("held %v, want this node's fresh entry", held)
	}
	if len(all) != 2 || all[1] != other {
		t.Fatalf("all %v: another node's reservation of the address is missing, or this node's is counted twice", all)
	}

	o.cached = func(context.Context) (*reserve.Listing, error) { return nil, errors.New("the cache is away") }
	if _, all, err := o.lookup(context.Background(), config.ReturnSameNode, pod); err != nil || store.lists != 1 || len(all) != 1 {
		t.Fatalf("after a failed cached read: %v %d Lists, all %v", err, store.lists, all)
	}
	if _, _, err := o.lookup(context.Background(), config.ReturnAnyNode, pod); err != nil || store.lists != 2 {
		t.Fatalf("anyNode: %v, %d Lists; it reads every node's reservations consistently", err, store.lists)
	}
}
