package calicostore_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/capo-net/capo/pkg/reserve"
	"github.com/capo-net/capo/pkg/reserve/calicostore"
	"github.com/capo-net/capo/pkg/reserve/calicostore/internal/layout"
	"github.com/capo-net/capo/pkg/reserve/reservetest"
)

const legacyNode = "worker-legacy"

// putLegacy stores the objects today's per-node layout wrote for
// worker-legacy: capo-worker-legacy (packed, 3 entries) and
// capo-worker-legacy-s1 (plain text, 1 entry).
func putLegacy(t *testing.T, objs *reservetest.Objects) {
	t.Helper()
	if err := objs.PutFiles("internal/layout/testdata/legacy-z1.json", "internal/layout/testdata/legacy-v1-s1.json"); err != nil {
		t.Fatal(err)
	}
}

var legacyIPs = []string{"10.77.0.5", "10.77.0.9", "10.77.1.1", "fd00:77::5"}

func TestMigrationMovesEntriesWithTheirMetadata(t *testing.T) {
	eachBackend(t, func(t *testing.T, etcd bool) {
		s := reservetest.NewStore(reserve.DefaultLimits)
		s.Objects.EtcdDelete = etcd
		putLegacy(t, s.Objects)
		mustReserve(t, s, legacyNode, "10.77.0.9") // a newer agent reserved it again, before the migration
		before, err := s.List(ctx)
		if err != nil || before.Legacy != 2 || !slices.Equal(ips(before.Entries), legacyIPs) {
			t.Fatalf("before: %+v %v", before, err)
		}
		if got := nodeIPs(t, s, legacyNode); !slices.Equal(got, legacyIPs) {
			t.Fatalf("the node's read before the migration: %v", got)
		}
		tidied, err := s.Tidy(ctx)
		if err != nil || tidied.Migrated != 4 || tidied.Deleted != 2 {
			t.Fatalf("tidy %+v %v", tidied, err)
		}
		after, _ := s.List(ctx)
		if after.Legacy != 0 || !slices.Equal(ips(after.Entries), legacyIPs) {
			t.Fatalf("after: %+v", after)
		}
		if names := s.Objects.Names(); len(names) != 1 || !strings.HasPrefix(names[0], "capo.bucket-") {
			t.Fatalf("objects %v", names)
		}
		// Entries keep what the per-node objects said, first timestamps too.
		for i := range before.Entries {
			if a, b := before.Entries[i], after.Entries[i]; a != b {
				t.Errorf("%s: before %+v\nafter %+v", a.IP, a, b)
			}
		}
		if e := after.Entries[1]; e.Pod != "broker-1" || !e.ReservedAt.Equal(time.Date(2025, 11, 20, 9, 31, 0, 0, time.UTC)) {
			t.Errorf("10.77.0.9 took the newer record: %+v", e)
		}
	})
}

// An agent of the per-node layout writes to its object while the
// controller migrates it: the write is moved too, never deleted with it.
func TestMigrationRacesAnAgentOfThePerNodeLayout(t *testing.T) {
	eachBackend(t, func(t *testing.T, etcd bool) {
		s := reservetest.NewStore(reserve.DefaultLimits)
		s.Objects.EtcdDelete = etcd
		putLegacy(t, s.Objects)
		if _, err := s.List(ctx); err != nil {
			t.Fatal(err)
		}
		first := calicostore.LegacyName(legacyNode, 0)
		once(s.Objects, "update", first, func() { // the controller is about to retire it
			o, _ := s.Objects.Object(first)
			o.CIDRs = append(o.CIDRs, "10.77.0.77/32") // the old agent adds an address (its record is lost in the edit: kept without metadata)
			s.Objects.Put(o)
		})
		if _, err := s.Tidy(ctx); err != nil {
			t.Fatal(err)
		}
		s.Objects.Before = nil
		after, _ := s.List(ctx)
		if got := ips(after.Entries); !slices.Contains(got, "10.77.0.77") || after.Legacy != 0 {
			t.Fatalf("after the race: %v, %d per-node objects", got, after.Legacy)
		}
	})
}

// Before the migration, releasing an entry of a per-node object works,
// and the object keeps the format its agents read.
func TestReleaseFromThePerNodeLayout(t *testing.T) {
	s := reservetest.NewStore(reserve.DefaultLimits)
	putLegacy(t, s.Objects)
	rel, err := s.Release(ctx, []reserve.Ref{{Node: legacyNode, IP: "10.77.0.5"}, {Node: legacyNode, IP: "10.77.1.1"}})
	if err != nil || len(rel) != 2 {
		t.Fatalf("released %v %v", rel, err)
	}
	o, ok := s.Objects.Object(calicostore.LegacyName(legacyNode, 0))
	if !ok || !strings.HasPrefix(o.Annotations[calicostore.MetadataAnnotation], "z1:") || len(o.CIDRs) != 2 {
		t.Fatalf("first object %+v", o)
	}
	if _, ok := s.Objects.Object(calicostore.LegacyName(legacyNode, 1)); ok {
		t.Fatal("the emptied second object is still there")
	}
}

// Tidy puts the lists right and deletes what writers left half done.
func TestTidyRepairsWhatWritersLeft(t *testing.T) {
	s := reservetest.NewStore(reserve.Limits{MaxIPs: 1, MaxAnnotationBytes: 1 << 20})
	mustReserve(t, s, "n1", "10.0.0.1", "10.0.0.2", "10.0.0.3")
	b := calicostore.BucketOf("n1")
	head, _ := s.Objects.Object(calicostore.BucketName(b, 0))
	head.Annotations[calicostore.OverflowAnnotation] = "1,5" // 2 unlisted, 5 listed but gone
	s.Objects.Put(head)
	empty := reservetest.Object(layout.NewBucketObject((b+1)%layout.Buckets, 0).Object()) // emptied, never deleted
	s.Objects.Put(empty)
	retired := reservetest.Object{
		Name: calicostore.BucketName((b+2)%layout.Buckets, 0), Labels: map[string]string{calicostore.ManagedByLabel: calicostore.ManagedBy},
		Annotations: map[string]string{calicostore.MetadataAnnotation: "retired"},
	}
	s.Objects.Put(retired)
	if _, err := s.List(ctx); err != nil {
		t.Fatal(err)
	}
	tidied, err := s.Tidy(ctx)
	if err != nil || tidied.Relisted != 1 || tidied.Deleted != 2 {
		t.Fatalf("tidy %+v %v", tidied, err)
	}
	head, _ = s.Objects.Object(calicostore.BucketName(b, 0))
	if head.Annotations[calicostore.OverflowAnnotation] != "1,2" || len(s.Objects.Names()) != 3 {
		t.Fatalf("list %q, objects %v", head.Annotations[calicostore.OverflowAnnotation], s.Objects.Names())
	}
}
