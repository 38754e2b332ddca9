package release

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/capo-net/capo/pkg/reserve"
)

var t0 = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)

func res(ip, ns, pod string, age time.Duration, ownerKind, owner, ownerUID string) reserve.Entry {
	return reserve.Entry{IP: ip, Namespace: ns, Pod: pod, ReservedAt: t0.Add(-age), Seen: t0.Add(-age), Reason: reserve.ReasonCNIDel, OwnerKind: ownerKind, OwnerName: owner, OwnerUID: ownerUID}
}

func world() World {
	return World{
		Namespaces:   map[string]bool{"kafka": true, "redis": true},
		TrackedKinds: map[string]bool{"StatefulSet": true, "ReplicaSet": true},
		Owners: map[OwnerKey]Owner{
			{"StatefulSet", "kafka", "broker"}: {UID: "sts-1", StatefulSet: true, Replicas: 3},
			{"StatefulSet", "redis", "cache"}:  {UID: "sts-2", StatefulSet: true, Replicas: 2, OrdinalStart: 5},
			{"ReplicaSet", "kafka", "ui-abc"}:  {UID: "rs-1"},
			{"ReplicaSet", "kafka", "old-xyz"}: {UID: "rs-2", ParentGone: true},
		},
	}
}

func reasons(rs []Release) map[string]Reason {
	out := map[string]Reason{}
	for _, r := range rs {
		if _, dup := out[r.IP]; dup {
			panic("released twice: " + r.IP)
		}
		out[r.IP] = r.Reason
	}
	return out
}

func TestPlanRules(t *testing.T) {
	l := Limits{TTL: 40 * time.Minute, MaxCount: 100}
	cases := []struct {
		name string
		e    reserve.Entry
		w    func(*World)
		want Reason // "" = kept
	}{
		{"young, owner alive", res("10.0.0.1", "kafka", "broker-1", time.Minute, "StatefulSet", "broker", "sts-1"), nil, ""},
		{"TTL edge: just under", res("10.0.0.2", "kafka", "broker-1", 40*time.Minute-time.Second, "StatefulSet", "broker", "sts-1"), nil, ""},
		{"TTL edge: exactly", res("10.0.0.3", "kafka", "broker-1", 40*time.Minute, "StatefulSet", "broker", "sts-1"), nil, TTL},
		{"namespace deleted", res("10.0.0.4", "gone", "x-0", time.Minute, "", "", ""), nil, NamespaceGone},
		{"namespace unknown to a world without namespaces", res("10.0.0.5", "gone", "x-0", time.Minute, "", "", ""), func(w *World) { w.Namespaces = nil }, ""},
		{"statefulset deleted", res("10.0.0.6", "kafka", "zk-0", time.Minute, "StatefulSet", "zk", "sts-9"), nil, OwnerGone},
		{"statefulset re-created with the same name", res("10.0.0.7", "kafka", "broker-0", time.Minute, "StatefulSet", "broker", "sts-OLD"), nil, OwnerGone},
		{"scaled below the ordinal", res("10.0.0.8", "kafka", "broker-3", time.Minute, "StatefulSet", "broker", "sts-1"), nil, ScaledDown},
		{"ordinal still wanted", res("10.0.0.9", "kafka", "broker-2", time.Minute, "StatefulSet", "broker", "sts-1"), nil, ""},
		{"spec.ordinals.start: below the range", res("10.0.0.10", "redis", "cache-4", time.Minute, "StatefulSet", "cache", "sts-2"), nil, ScaledDown},
		{"spec.ordinals.start: in the range", res("10.0.0.11", "redis", "cache-6", time.Minute, "StatefulSet", "cache", "sts-2"), nil, ""},
		{"spec.ordinals.start: above the range", res("10.0.0.12", "redis", "cache-7", time.Minute, "StatefulSet", "cache", "sts-2"), nil, ScaledDown},
		{"replicaset alive", res("10.0.0.13", "kafka", "ui-abc-q", time.Minute, "ReplicaSet", "ui-abc", "rs-1"), nil, ""},
		{"replicaset's deployment gone", res("10.0.0.14", "kafka", "old-xyz-q", time.Minute, "ReplicaSet", "old-xyz", "rs-2"), nil, OwnerGone},
		{"untracked owner kind never judged", res("10.0.0.15", "kafka", "job-q", time.Minute, "Job", "batch", "j-1"), nil, ""},
		{"no owner", res("10.0.0.16", "kafka", "bare", time.Minute, "", "", ""), nil, ""},
		{"manual wins over everything", res("10.0.0.17", "kafka", "broker-1", time.Minute, "StatefulSet", "broker", "sts-1"), func(w *World) { w.Manual = map[reserve.Ref]bool{{IP: "10.0.0.17"}: true} }, Manual},
		{"pod name not of the set", res("10.0.0.18", "kafka", "other-9", time.Minute, "StatefulSet", "broker", "sts-1"), nil, ""},
		{"no metadata (added by hand): kept, its age counts from when first seen", reserve.Entry{IP: "10.0.0.19"}, nil, ""},
		{"no metadata, seen a TTL ago", reserve.Entry{IP: "10.0.0.20", Seen: t0.Add(-41 * time.Minute)}, nil, TTL},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := world()
			if tc.w != nil {
				tc.w(&w)
			}
			got := reasons(Plan([]reserve.Entry{tc.e}, t0, l, w))[tc.e.IP]
			if got != tc.want {
				t.Fatalf("reason %q, want %q", got, tc.want)
			}
		})
	}
}

func TestPlanMaxCountOldestFirst(t *testing.T) {
	var es []reserve.Entry
	// Five young reservations, two sharing a timestamp; max count 3.
	for i, age := range []time.Duration{5, 1, 3, 3, 2} {
		es = append(es, res(fmt.Sprintf("10.0.1.%d", i), "kafka", "bare", age*time.Minute, "", "", ""))
	}
	es = append(es, res("10.0.1.9", "gone", "x", 9*time.Minute, "", "", "")) // released by another rule, not counted
	got := reasons(Plan(es, t0, Limits{TTL: time.Hour, MaxCount: 3}, world()))
	want := map[string]Reason{"10.0.1.0": MaxCount, "10.0.1.2": MaxCount, "10.0.1.9": NamespaceGone}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for ip, r := range want {
		if got[ip] != r {
			t.Fatalf("got %v, want %v", got, want)
		}
	}
	// The tie (10.0.1.2 and 10.0.1.3, both 3m) breaks by address, stably.
	for range 20 {
		slices.Reverse(es)
		if g := reasons(Plan(es, t0, Limits{TTL: time.Hour, MaxCount: 3}, world())); g["10.0.1.2"] != MaxCount || g["10.0.1.3"] != "" {
			t.Fatalf("tie broke differently: %v", g)
		}
	}
}

func TestPlanNothingDue(t *testing.T) {
	es := []reserve.Entry{res("10.0.2.1", "kafka", "broker-0", time.Minute, "StatefulSet", "broker", "sts-1")}
	if got := Plan(es, t0, Limits{TTL: time.Hour, MaxCount: 1}, world()); len(got) != 0 {
		t.Fatalf("released %v", got)
	}
}

// Two clocks: the agent that wrote an entry may be minutes off; age is
// judged from when the controller first saw it, by its own clock.
func TestPlanJudgesAgeByTheControllersClock(t *testing.T) {
	w := World{Namespaces: map[string]bool{"kafka": true}}
	l := Limits{TTL: 40 * time.Minute, MaxCount: 10}
	slow := reserve.Entry{IP: "10.0.0.1", Namespace: "kafka", ReservedAt: t0.Add(-41 * time.Minute), Seen: t0.Add(-time.Minute)}
	unseen := reserve.Entry{IP: "10.0.0.2", Namespace: "kafka", ReservedAt: t0.Add(-3 * time.Hour)} // written since the last pass
	byHand := reserve.Entry{IP: "10.9.0.0/30"}                                                      // no metadata at all
	due := reserve.Entry{IP: "10.0.0.3", Namespace: "kafka", ReservedAt: t0, Seen: t0.Add(-40 * time.Minute)}
	got := Plan([]reserve.Entry{slow, unseen, byHand, due}, t0, l, w)
	if len(got) != 1 || got[0].IP != "10.0.0.3" || got[0].Reason != TTL {
		t.Fatalf("plan %+v, want only 10.0.0.3 by ttl", got)
	}
	// Max count drops the oldest by the same clock.
	got = Plan([]reserve.Entry{slow, unseen}, t0, Limits{TTL: l.TTL, MaxCount: 1}, w)
	if len(got) != 1 || got[0].IP != "10.0.0.1" || got[0].Reason != MaxCount {
		t.Fatalf("plan %+v, want 10.0.0.1 by max-count", got)
	}
}

func TestPlanPerWorkloadTTL(t *testing.T) {
	l := Limits{TTL: 40 * time.Minute, MaxCount: 100}
	w := world()
	w.TTLs = TTLs{
		Pods:       map[string]time.Duration{"kafka/broker-0": 2 * time.Hour},
		Sets:       map[OwnerKey]time.Duration{{"StatefulSet", "kafka", "broker"}: 6 * time.Hour},
		Namespaces: map[string]time.Duration{"kafka": 10 * time.Minute, "redis": 3 * time.Hour},
	}
	got := reasons(Plan([]reserve.Entry{
		res("10.0.0.1", "kafka", "broker-0", 3*time.Hour, "StatefulSet", "broker", "sts-1"),  // pod: 2h
		res("10.0.0.2", "kafka", "broker-0", time.Hour, "StatefulSet", "broker", "sts-1"),    // pod: 2h
		res("10.0.0.3", "kafka", "broker-1", 5*time.Hour, "StatefulSet", "broker", "sts-1"),  // set: 6h
		res("10.0.0.4", "kafka", "broker-2", 7*time.Hour, "StatefulSet", "broker", "sts-1"),  // set: 6h
		res("10.0.0.5", "kafka", "ui-abc-1", 15*time.Minute, "ReplicaSet", "ui-abc", "rs-1"), // namespace: 10m
		res("10.0.0.6", "redis", "cache-5", 2*time.Hour, "StatefulSet", "cache", "sts-2"),    // namespace: 3h
		res("10.0.0.7", "other", "x-0", 41*time.Minute, "", "", ""),                          // config: 40m
	}, t0, l, func() World { w.Namespaces["other"] = true; return w }()))
	want := map[string]Reason{"10.0.0.1": TTL, "10.0.0.4": TTL, "10.0.0.5": TTL, "10.0.0.7": TTL}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	// A shorter TTL does not beat the workload rules: they come first.
	if d, from := w.TTLs.TTLOf(res("10.0.0.8", "kafka", "zk-0", 0, "StatefulSet", "zk", "x"), l.TTL); d != 10*time.Minute || from != FromNamespace {
		t.Fatalf("zk-0: %s from %s", d, from)
	}
}

func TestParseTTL(t *testing.T) {
	for in, ok := range map[string]bool{"90m": true, "6h": true, "1s": true, "720h": true, "721h": false, "0s": false, "-1h": false, "soon": false, "": false, "40": false} {
		if _, err := ParseTTL(in); (err == nil) != ok {
			t.Errorf("%q: %v", in, err)
		}
	}
}

func TestPlanKeepsScaledDownWhenTheSetSaysSo(t *testing.T) {
	l := Limits{TTL: 40 * time.Minute, MaxCount: 100}
	w := world()
	o := w.Owners[OwnerKey{"StatefulSet", "kafka", "broker"}]
	o.KeepScaledDown = true
	w.Owners[OwnerKey{"StatefulSet", "kafka", "broker"}] = o
	got := reasons(Plan([]reserve.Entry{
		res("10.0.0.1", "kafka", "broker-3", time.Minute, "StatefulSet", "broker", "sts-1"),    // scaled down: kept
		res("10.0.0.2", "kafka", "broker-4", 41*time.Minute, "StatefulSet", "broker", "sts-1"), // kept no longer than its TTL
		res("10.0.0.3", "kafka", "broker-5", time.Minute, "StatefulSet", "broker", "sts-OLD"),  // another set of the name: gone
		res("10.0.0.4", "redis", "cache-9", time.Minute, "StatefulSet", "cache", "sts-2"),      // not opted in
	}, t0, l, w))
	want := map[string]Reason{"10.0.0.2": TTL, "10.0.0.3": OwnerGone, "10.0.0.4": ScaledDown}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for in, want := range map[string]bool{"keep": true, "release": false, "": false} {
		if keep, err := ParseScaleDown(in); err != nil || keep != want {
			t.Errorf("%q: %v %v", in, keep, err)
		}
	}
	if _, err := ParseScaleDown("Keep"); err == nil {
		t.Error("Keep accepted")
	}
}

func TestPlanAcrossARecreatedStatefulSet(t *testing.T) {
	l := Limits{TTL: 40 * time.Minute, MaxCount: 100}
	w := world()
	w.Namespaces["zoo"] = true
	w.RecreateNamespaces = map[string]bool{"kafka": true}
	w.RecreateSets = map[OwnerKey]bool{{"StatefulSet", "zoo", "keeper"}: true}
	w.Owners[OwnerKey{"StatefulSet", "zoo", "keeper"}] = Owner{UID: "sts-new", StatefulSet: true, Replicas: 2}
	entries := []reserve.Entry{
		res("10.0.0.1", "kafka", "broker-0", time.Minute, "StatefulSet", "broker", "sts-OLD"), // namespace opts in, re-created: kept, re-owned
		res("10.0.0.2", "kafka", "broker-4", time.Minute, "StatefulSet", "broker", "sts-OLD"), // ... but the new set has 3: scaled down
		res("10.0.0.3", "kafka", "zk-0", time.Minute, "StatefulSet", "zk", "sts-9"),           // no zk yet: awaiting re-creation
		res("10.0.0.4", "kafka", "zk-1", 41*time.Minute, "StatefulSet", "zk", "sts-9"),        // ... within its time only
		res("10.0.0.5", "zoo", "keeper-1", time.Minute, "StatefulSet", "keeper", "sts-old"),   // the set opts in: kept, re-owned
		res("10.0.0.6", "redis", "cache-5", time.Minute, "StatefulSet", "cache", "sts-OLD"),   // not opted in: a new owner inherits nothing
		res("10.0.0.7", "kafka", "ui-abc-1", time.Minute, "ReplicaSet", "ui-old", "rs-9"),     // not a StatefulSet
	}
	got := reasons(Plan(entries, t0, l, w))
	want := map[string]Reason{"10.0.0.2": ScaledDown, "10.0.0.4": TTL, "10.0.0.6": OwnerGone, "10.0.0.7": OwnerGone}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	var kept []reserve.Entry
	for _, e := range entries {
		if _, gone := got[e.IP]; !gone {
			kept = append(kept, e)
		}
	}
	re := Reowns(kept, w)
	if len(re) != 2 || len(re["sts-1"]) != 1 || re["sts-1"][0].IP != "10.0.0.1" || len(re["sts-new"]) != 1 || re["sts-new"][0].IP != "10.0.0.5" {
		t.Fatalf("reowns %v", re)
	}
}
