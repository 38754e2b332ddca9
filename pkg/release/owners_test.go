package release

import (
	"fmt"
	"testing"
	"time"

	"github.com/capo-net/capo/pkg/reserve"
)

// Kruise's Advanced StatefulSet and listed owner kinds, beside apps/v1's:
// a set of one kind never stands for a set of another of the same name.
func TestPlanOwnersBeyondAppsV1(t *testing.T) {
	const kruise, broker = "StatefulSet.apps.kruise.io", "Broker.example.com"
	l := Limits{TTL: 40 * time.Minute, MaxCount: 100}
	withOwners := func(w *World) {
		w.TrackedKinds[kruise], w.TrackedKinds[broker] = true, true
		w.Owners[OwnerKey{kruise, "kafka", "kafka"}] = Owner{UID: "ks-1", StatefulSet: true, Replicas: 3}
		w.Owners[OwnerKey{kruise, "kafka", "zk"}] = Owner{UID: "ks-2", StatefulSet: true, Replicas: 3, OrdinalStart: 1, Reserved: map[int]bool{2: true}}
		w.Owners[OwnerKey{broker, "kafka", "b"}] = Owner{UID: "b-1"}
	}
	unwatched := func(w *World) { delete(w.TrackedKinds, kruise); delete(w.TrackedKinds, broker) }
	cases := []struct {
		name string
		e    reserve.Entry
		w    func(*World)
		want Reason // "" = kept
	}{
		{"kruise set alive", res("10.1.0.1", "kafka", "kafka-1", time.Minute, kruise, "kafka", "ks-1"), withOwners, ""},
		{"kruise set alive, no apps/v1 set of its name", res("10.1.0.2", "kafka", "kafka-1", time.Minute, kruise, "kafka", "ks-1"), withOwners, ""},
		{"kruise set deleted", res("10.1.0.3", "kafka", "kafka-1", time.Minute, kruise, "gone", "ks-9"), withOwners, OwnerGone},
		{"kruise set re-created", res("10.1.0.4", "kafka", "kafka-1", time.Minute, kruise, "kafka", "ks-OLD"), withOwners, OwnerGone},
		{"kruise scaled below the ordinal", res("10.1.0.5", "kafka", "kafka-3", time.Minute, kruise, "kafka", "ks-1"), withOwners, ScaledDown},
		{"kruise reserveOrdinals takes the ordinal", res("10.1.0.6", "kafka", "zk-2", time.Minute, kruise, "zk", "ks-2"), withOwners, ScaledDown},
		{"kruise reserveOrdinals moves the last member up", res("10.1.0.7", "kafka", "zk-4", time.Minute, kruise, "zk", "ks-2"), withOwners, ""},
		{"kruise ordinals.start: below it", res("10.1.0.8", "kafka", "zk-0", time.Minute, kruise, "zk", "ks-2"), withOwners, ScaledDown},
		{"kruise past its last member", res("10.1.0.9", "kafka", "zk-5", time.Minute, kruise, "zk", "ks-2"), withOwners, ScaledDown},
		{"listed kind alive: never scaled down", res("10.1.0.10", "kafka", "b-99", time.Minute, broker, "b", "b-1"), withOwners, ""},
		{"listed kind deleted", res("10.1.0.11", "kafka", "c-0", time.Minute, broker, "c", "c-1"), withOwners, OwnerGone},
		{"listed kind re-created", res("10.1.0.12", "kafka", "b-0", time.Minute, broker, "b", "b-OLD"), withOwners, OwnerGone},
		{"kruise not watchable: never gone", res("10.1.0.13", "kafka", "kafka-1", time.Minute, kruise, "gone", "ks-9"), unwatched, ""},
		{"listed kind not watchable: never gone", res("10.1.0.14", "kafka", "c-0", time.Minute, broker, "c", "c-1"), unwatched, ""},
		{"not watchable: its time still ends it", res("10.1.0.15", "kafka", "c-0", 41*time.Minute, broker, "c", "c-1"), unwatched, TTL},
		{"an apps/v1 set of the kruise set's name does not stand for it", res("10.1.0.16", "kafka", "broker-1", time.Minute, kruise, "broker", "sts-1"), withOwners, OwnerGone},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := world()
			tc.w(&w)
			if got := reasons(Plan([]reserve.Entry{tc.e}, t0, l, w))[tc.e.IP]; got != tc.want {
				t.Fatalf("reason %q, want %q", got, tc.want)
			}
		})
	}
}

// A Kruise set's (and a listed kind's) own reservation time and its opt-in
// to keeping its members across a re-creation work as an apps/v1 set's.
func TestPolicyOfOwnersBeyondAppsV1(t *testing.T) {
	const kruise = "StatefulSet.apps.kruise.io"
	l := Limits{TTL: 40 * time.Minute, MaxCount: 100}
	w := world()
	w.TrackedKinds[kruise] = true
	w.StableKinds = map[string]bool{kruise: true}
	w.Owners[OwnerKey{kruise, "kafka", "kafka"}] = Owner{UID: "ks-new", StatefulSet: true, Replicas: 3}
	w.TTLs.Sets = map[OwnerKey]time.Duration{{kruise, "kafka", "kafka"}: 2 * time.Hour}
	w.RecreateSets = map[OwnerKey]bool{{kruise, "kafka", "kafka"}: true}
	w.RecreateNamespaces = map[string]bool{"zoo": true}
	w.Namespaces["zoo"] = true

	long := res("10.2.0.1", "kafka", "kafka-1", 90*time.Minute, kruise, "kafka", "ks-new")
	if d, from := w.TTLs.TTLOf(long, l.TTL); d != 2*time.Hour || from != FromStatefulSet {
		t.Fatalf("the Kruise set's time: %s from %s", d, from)
	}
	entries := []reserve.Entry{
		long, // held 90m under the set's 2h
		res("10.2.0.2", "kafka", "kafka-2", time.Minute, kruise, "kafka", "ks-old"), // the set was re-created and opts in: kept, re-owned
		res("10.2.0.3", "zoo", "zk-0", time.Minute, kruise, "zk", "ks-9"),           // the namespace opts in: awaiting re-creation
		res("10.2.0.4", "kafka", "web-0", time.Minute, "Broker.example.com", "web", "b-9"),
	}
	w.TrackedKinds["Broker.example.com"] = true // tracked, but not one with stable identities here
	got := reasons(Plan(entries, t0, l, w))
	if len(got) != 1 || got["10.2.0.4"] != OwnerGone {
		t.Fatalf("released %v, want only the untracked-stable owner's", got)
	}
	reowned := Reowns(entries[:3], w)
	if len(reowned["ks-new"]) != 1 || reowned["ks-new"][0].IP != "10.2.0.2" {
		t.Fatalf("re-owned %v, want kafka-2's to the new Kruise set", reowned)
	}
}

// An entry written before owner kinds were told apart by group names a
// Kruise member's owner "StatefulSet": its set is found by the UID it
// recorded, and its member is not released as owner-gone; an entry whose
// UID no watched set holds is judged as an apps/v1 set's.
func TestOldEntriesOfKruiseMembersFindTheirSet(t *testing.T) {
	const kruise = "StatefulSet.apps.kruise.io"
	l := Limits{TTL: 40 * time.Minute, MaxCount: 100}
	w := world()
	w.TrackedKinds[kruise] = true
	w.StableKinds = map[string]bool{kruise: true}
	w.Owners[OwnerKey{kruise, "kafka", "kafka"}] = Owner{UID: "ks-1", StatefulSet: true, Replicas: 2}
	got := reasons(Plan([]reserve.Entry{
		res("10.3.0.1", "kafka", "kafka-1", time.Minute, "StatefulSet", "kafka", "ks-1"), // the Kruise set's: kept
		res("10.3.0.2", "kafka", "kafka-5", time.Minute, "StatefulSet", "kafka", "ks-1"), // ... scaled down as its member
		res("10.3.0.3", "kafka", "kafka-1", time.Minute, "StatefulSet", "kafka", "ks-9"), // no set holds that UID: gone
		res("10.3.0.4", "redis", "kafka-1", time.Minute, "StatefulSet", "kafka", "ks-1"), // another namespace: not that set
	}, t0, l, w))
	want := map[string]Reason{"10.3.0.2": ScaledDown, "10.3.0.3": OwnerGone, "10.3.0.4": OwnerGone}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

// While a kind named StatefulSet beyond apps/v1 is not watched (not listed
// yet, forbidden, not served), an entry written before owner kinds were
// told apart by group may be one of its members: no owner rule ends it,
// its time still does, and it is handed to no re-created apps/v1 set. One
// that an apps/v1 set's UID names is that set's, whatever else is watched.
func TestOldEntriesAreNotJudgedWhileAKindThatMayOwnThemIsUnwatched(t *testing.T) {
	const kruise = "StatefulSet.apps.kruise.io"
	l := Limits{TTL: 40 * time.Minute, MaxCount: 100}
	w := world()
	w.UnwatchedKinds = map[string]bool{kruise: true}
	entries := []reserve.Entry{
		res("10.4.0.1", "kafka", "kafka-1", time.Minute, "StatefulSet", "kafka", "ks-1"),    // no apps/v1 set of its name
		res("10.4.0.2", "kafka", "broker-1", time.Minute, "StatefulSet", "broker", "ks-2"),  // an apps/v1 set of its name, another UID
		res("10.4.0.3", "kafka", "kafka-2", 41*time.Minute, "StatefulSet", "kafka", "ks-1"), // its time is up
		res("10.4.0.4", "kafka", "broker-5", time.Minute, "StatefulSet", "broker", "sts-1"), // the apps/v1 set's: scaled down
		res("10.4.0.5", "kafka", "c-0", time.Minute, "Broker.example.com", "c", "c-1"),      // another kind's: not of a StatefulSet
		res("10.4.0.6", "kafka", "kafka-3", time.Minute, kruise, "kafka", "ks-1"),           // written with its group: not tracked
	}
	got := reasons(Plan(entries, t0, l, w))
	want := map[string]Reason{"10.4.0.3": TTL, "10.4.0.4": ScaledDown}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	w.RecreateNamespaces = map[string]bool{"kafka": true}
	if re := Reowns(entries[:2], w); len(re) != 0 {
		t.Fatalf("an entry whose owner is not known handed over: %v", re)
	}
	// Watched and listed, the kind holds no set of that UID: apps/v1's rules.
	w.UnwatchedKinds, w.RecreateNamespaces = nil, nil
	w.TrackedKinds[kruise] = true
	w.StableKinds = map[string]bool{kruise: true}
	got = reasons(Plan(entries[:1], t0, l, w))
	if got["10.4.0.1"] != OwnerGone {
		t.Fatalf("with the kind watched: %v, want owner-gone", got)
	}
}
