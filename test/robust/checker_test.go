package robust

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	cerrors "github.com/projectcalico/calico/libcalico-go/lib/errors"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/capo-net/capo/daemon/controller"
	"github.com/capo-net/capo/pkg/reserve"
)

const caseIP, casePod, caseOther = "10.0.0.5", "ns/db-0", "ns/web-1"

// judgeCase is a history written by hand (beside a selected pod's DEL of
// ip at t0), a sample, and the violation the checker must find ("" none).
type judgeCase struct {
	name   string
	events func(t0 time.Time) []Event
	sample func(t0 time.Time) *sample
	want   string
}

var judgeCases = []judgeCase{
	{
		"freed unreserved", func(time.Time) []Event { return nil },
		func(t0 time.Time) *sample {
			return &sample{T0: t0.Add(time.Second), T1: t0.Add(1100 * time.Millisecond)}
		}, vFreeUnreserved,
	},
	{
		"reserved", func(time.Time) []Event { return nil },
		func(t0 time.Time) *sample {
			return &sample{T0: t0.Add(time.Second), T1: t0.Add(1100 * time.Millisecond), Entries: []reserve.Entry{{IP: caseIP, Pod: "db-0", Namespace: "ns"}}}
		}, "",
	},
	{
		"still allocated to the pod (journaled)", func(time.Time) []Event { return nil },
		func(t0 time.Time) *sample {
			return &sample{T0: t0.Add(time.Second), T1: t0.Add(1100 * time.Millisecond), Holder: map[string]string{caseIP: "k8s-pod-network.aaaa"}}
		}, "",
	},
	{"given to another pod", func(t0 time.Time) []Event {
		return []Event{{Op: opAdd, Pod: caseOther, Sandbox: "bbbb", Start: t0.Add(200 * time.Millisecond), End: t0.Add(400 * time.Millisecond), IPs: []string{caseIP}}}
	}, func(time.Time) *sample { return nil }, vTwoPods},
	{"released by TTL before its time", func(t0 time.Time) []Event {
		return []Event{{Op: opReleased, Pod: casePod, Node: "n1", IPs: []string{caseIP}, Reason: "ttl", Start: t0.Add(2 * time.Second), End: t0.Add(2 * time.Second)}}
	}, func(time.Time) *sample { return nil }, vUnjustified},
	// The controller covered the teardown (no sandbox; dated from it) just
	// as the node's agent reserved a later one of the same address: the
	// TTL release of the coverage is judged by the coverage's own dates.
	{"a coverage released by TTL beside a later reservation", func(t0 time.Time) []Event {
		return []Event{{Op: opReleased, Pod: casePod, Node: "n1", IPs: []string{caseIP}, Reason: "ttl", Start: t0.Add(20500 * time.Millisecond), End: t0.Add(20500 * time.Millisecond)}}
	}, func(t0 time.Time) *sample {
		cover := reserve.Entry{IP: caseIP, Pod: "db-0", Namespace: "ns", Node: "n1", Reason: "agent-away", ReservedAt: t0, Seen: t0}
		agent := reserve.Entry{IP: caseIP, Pod: "db-0", Namespace: "ns", Node: "n1", Sandbox: "bbbb", Reason: reserve.ReasonCNIDel, ReservedAt: t0.Add(15 * time.Second), Seen: t0.Add(15 * time.Second)}
		return &sample{T0: t0.Add(16 * time.Second), T1: t0.Add(16 * time.Second), Entries: []reserve.Entry{cover, agent}}
	}, ""},
	// The same, the coverage naming the sandbox (Calico's annotations),
	// and the agent's reservation of that sandbox stamped only after the
	// release: the release's reason (reservedAs) tells them apart.
	{"a coverage released by TTL beside the agent's of its sandbox", func(t0 time.Time) []Event {
		return []Event{{Op: opReleased, Pod: casePod, Node: "n1", Sandbox: "aaaa", IPs: []string{caseIP}, Reason: "ttl", Value: "agent-away", Start: t0.Add(20500 * time.Millisecond), End: t0.Add(20500 * time.Millisecond)}}
	}, func(t0 time.Time) *sample {
		cover := reserve.Entry{IP: caseIP, Pod: "db-0", Namespace: "ns", Node: "n1", Sandbox: "aaaa", Reason: "agent-away", ReservedAt: t0, Seen: t0}
		agent := reserve.Entry{IP: caseIP, Pod: "db-0", Namespace: "ns", Node: "n1", Sandbox: "aaaa", Reason: reserve.ReasonCNIDel, ReservedAt: t0.Add(time.Second), Seen: t0.Add(25 * time.Second)}
		return &sample{T0: t0.Add(16 * time.Second), T1: t0.Add(16 * time.Second), Entries: []reserve.Entry{cover, agent}}
	}, ""},
	{"released as owner-gone, its set deleted", func(t0 time.Time) []Event {
		return []Event{
			{Op: opDeleteSet, Owner: "uid-1", Value: "db", Start: t0.Add(time.Second), End: t0.Add(time.Second)},
			{Op: opReleased, Pod: casePod, Node: "n1", IPs: []string{caseIP}, Reason: "owner-gone", Start: t0.Add(2 * time.Second), End: t0.Add(2 * time.Second)},
		}
	}, func(t0 time.Time) *sample { return &sample{T0: t0.Add(3 * time.Second), T1: t0.Add(3 * time.Second)} }, ""},
	{"a release by hand undone by the same teardown", func(t0 time.Time) []Event {
		return []Event{{Op: opCapoctl, Pod: casePod, Node: "n1", IPs: []string{caseIP}, Detail: "released 1", Start: t0.Add(time.Second), End: t0.Add(time.Second)}}
	}, func(t0 time.Time) *sample {
		e := reserve.Entry{IP: caseIP, Pod: "db-0", Namespace: "ns", Node: "n1", Sandbox: "aaaa", Reason: reserve.ReasonCNIDel, ReservedAt: t0.Add(2 * time.Second)}
		return &sample{T0: t0.Add(3 * time.Second), T1: t0.Add(3 * time.Second), Entries: []reserve.Entry{e}}
	}, vUndone},
	// A capoctl run slowed by API errors: the entry it ends is still
	// there until it lands, and is no reservation made again.
	{"a slow release by hand, sampled before it landed", func(t0 time.Time) []Event {
		return []Event{{Op: opCapoctl, Pod: casePod, Node: "n1", Sandbox: "aaaa", IPs: []string{caseIP}, Detail: "released 1", Start: t0.Add(time.Second), End: t0.Add(8 * time.Second)}}
	}, func(t0 time.Time) *sample {
		e := reserve.Entry{IP: caseIP, Pod: "db-0", Namespace: "ns", Node: "n1", Sandbox: "aaaa", Reason: reserve.ReasonCNIDel, ReservedAt: t0.Add(time.Second)}
		return &sample{T0: t0.Add(4 * time.Second), T1: t0.Add(4 * time.Second), Entries: []reserve.Entry{e}}
	}, ""},
	// The node's agent held a running member's address while calico-node
	// was replaced, an operator released the hold, then the member's DEL
	// came: a hold names no teardown, so the DEL is reserved again.
	{"a hold released by hand before the teardown", func(t0 time.Time) []Event {
		return []Event{{Op: opCapoctl, Pod: casePod, Node: "n1", Sandbox: "aaaa", IPs: []string{caseIP}, Value: reserve.ReasonCNIRewrite, Detail: "released 1", Start: t0.Add(-2 * time.Second), End: t0.Add(-2 * time.Second)}}
	}, func(t0 time.Time) *sample {
		e := reserve.Entry{IP: caseIP, Pod: "db-0", Namespace: "ns", Node: "n1", Sandbox: "aaaa", Reason: reserve.ReasonCNIDel, ReservedAt: t0.Add(time.Second)}
		return &sample{T0: t0.Add(3 * time.Second), T1: t0.Add(3 * time.Second), Entries: []reserve.Entry{e}}
	}, ""},
	// The controller reserved for the sandbox while its node's agent was
	// away, an operator released that by hand, then the sandbox's DEL came:
	// the release sticks for that sandbox, so capo rightly reserves nothing.
	{"released by hand before its teardown", func(t0 time.Time) []Event {
		return []Event{{Op: opCapoctl, Pod: casePod, Node: "n1", Sandbox: "aaaa", IPs: []string{caseIP}, Detail: "released 1", Start: t0.Add(-2 * time.Second), End: t0.Add(-2 * time.Second)}}
	}, func(t0 time.Time) *sample {
		return &sample{T0: t0.Add(time.Second), T1: t0.Add(1100 * time.Millisecond)}
	}, ""},
	{"released by hand before, another sandbox's", func(t0 time.Time) []Event {
		return []Event{{Op: opCapoctl, Pod: casePod, Node: "n1", Sandbox: "zzzz", IPs: []string{caseIP}, Detail: "released 1", Start: t0.Add(-2 * time.Second), End: t0.Add(-2 * time.Second)}}
	}, func(t0 time.Time) *sample {
		return &sample{T0: t0.Add(time.Second), T1: t0.Add(1100 * time.Millisecond)}
	}, vFreeUnreserved},
	{"a DEL failed with no fault", func(t0 time.Time) []Event {
		return []Event{{Op: opDel, Pod: caseOther, Sandbox: "cccc", Attempt: 1, Start: t0, End: t0.Add(time.Second), Err: "boom"}}
	}, func(time.Time) *sample { return nil }, vDelFailed},
	{"a DEL failed with the API server down", func(t0 time.Time) []Event {
		return []Event{
			{Op: opFault, Value: fAPIServer, Start: t0.Add(-time.Second), End: t0.Add(5 * time.Second)},
			{Op: opDel, Pod: caseOther, Sandbox: "cccc", Attempt: 1, Start: t0, End: t0.Add(time.Second), Err: "connection refused"},
		}
	}, func(time.Time) *sample { return nil }, ""},
}

// The checker on histories written by hand: each invariant found broken
// where it is, and not where the history accounts for what it sees.
func TestCheckerJudgesHistories(t *testing.T) {
	del := Event{Op: opDel, Pod: casePod, Node: "n1", Sandbox: "aaaa", IPs: []string{caseIP}, Selected: true, Owner: "uid-1", Attempt: 1}
	for _, tc := range judgeCases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHistory()
			t0 := time.Now().Add(-time.Minute)
			d := del
			h.Record(d, t0)
			for _, e := range tc.events(t0) {
				h.Record(e, e.Start)
				h.events[len(h.events)-1].End = e.End
			}
			var told []string
			k := &checker{
				cfg: Config{TTL: 20 * time.Second, MaxCount: 6}, ns: "ns", hist: h, out: func(s string) { told = append(told, s) },
				entries: map[string]*seen{}, told: map[string]bool{}, judged: map[int]bool{}, unchecked: map[string]int{},
			}
			if s := tc.sample(t0); s != nil {
				k.took(s)
			}
			k.logs = &logs{tails: map[string]*tail{}}
			k.round(true)
			var kinds []string
			for _, v := range k.violations {
				kinds = append(kinds, v.Kind)
			}
			got := strings.Join(kinds, ",")
			if got != tc.want {
				t.Fatalf("violations %q, want %q; told:\n%s", got, tc.want, strings.Join(told, "\n"))
			}
		})
	}
}

// A release the controller says may have been written (its write lost its
// answer) is read from its log as a release of its reason: the
// reservation's end is judged by that reason, not taken as a reservation
// gone without one.
func TestCheckerReadsAReleaseInDoubt(t *testing.T) {
	for _, c := range []struct {
		name, msg, reason string
		want              string
	}{
		{"in doubt, its reason held", controller.MaybeReleased, "owner-gone", ""},
		{"in doubt, its reason false", controller.MaybeReleased, "ttl", vUnjustified}, // held 2s, the TTL 20s
		{"not logged at all", "pass failed", "owner-gone", vFreeUnreserved},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newHistory()
			t0 := time.Now().Add(-time.Minute)
			h.Record(Event{Op: opDel, Pod: casePod, Node: "n1", Sandbox: "aaaa", IPs: []string{caseIP}, Selected: true, Owner: "uid-1", Attempt: 1}, t0)
			h.Record(Event{Op: opDeleteSet, Owner: "uid-1", Value: "db"}, t0.Add(time.Second))
			line, _ := json.Marshal(map[string]any{
				"time": t0.Add(2 * time.Second), "level": "WARN", "msg": c.msg, "ip": caseIP, "node": "n1", "pod": casePod,
				"sandbox": "aaaa", "reason": c.reason, "err": "context canceled",
			})
			path := filepath.Join(t.TempDir(), "controller-c1.log")
			if err := os.WriteFile(path, append(line, '\n'), 0o600); err != nil {
				t.Fatal(err)
			}
			var told []string
			k := &checker{
				cfg: Config{TTL: 20 * time.Second, MaxCount: 6}, ns: "ns", hist: h, out: func(s string) { told = append(told, s) },
				entries: map[string]*seen{}, told: map[string]bool{}, judged: map[int]bool{}, unchecked: map[string]int{},
				logs: &logs{c: &cluster{hist: h}, tails: map[string]*tail{}, who: map[string]string{}},
			}
			k.logs.follow(path, "capo-controller c1")
			k.pending = []*sample{{T0: t0.Add(3 * time.Second), T1: t0.Add(3100 * time.Millisecond)}} // free, unreserved
			k.round(true)
			var kinds []string
			for _, v := range k.violations {
				kinds = append(kinds, v.Kind)
			}
			if got := strings.Join(kinds, ","); got != c.want {
				t.Fatalf("violations %q, want %q; told:\n%s", got, c.want, strings.Join(told, "\n"))
			}
		})
	}
}

// A max-count release is judged by what can have been held before it:
// between two samples of 5 reservations, two members' teardowns may have
// added 2 (the controller's List saw 7 of ipReserveMaxCount 6); a plain
// pod's teardown adds none, nor does a member's after the release.
func TestMaxHeldCountsTeardownsBetweenSamples(t *testing.T) {
	t0 := time.Now()
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	k := &checker{cfg: Config{Sets: []string{"db", "mq"}, MaxCount: 6}, counts: []countAt{{at(0), at(100), 5}, {at(400), at(500), 5}}}
	evs := []Event{
		{Op: opDel, Pod: "ns/db-1", Start: at(150)},
		{Op: opEvict, Pod: "ns/mq-0", Start: at(200)},
		{Op: opDel, Pod: "ns/web-1", Start: at(250)}, // not selected
		{Op: opDel, Pod: "ns/db-2", Start: at(900)},  // after
	}
	ix := buildIndex(evs)
	if n, ok := k.maxHeld(ix, at(-5000), at(800)); !ok || n != 7 {
		t.Fatalf("maxHeld = %d, %v; want 7 (5 sampled, 2 members' teardowns before the next sample)", n, ok)
	}
	if n, _ := k.maxHeld(buildIndex(nil), at(-5000), at(800)); n != 5 {
		t.Fatalf("maxHeld with no teardowns = %d, want 5", n)
	}
}

// The harness retries what an etcd out of reach answers, though
// libcalico-go's error for it reads as invalid; an answer of the API
// server's stays final.
func TestRetryTellsAnEtcdAwayFromAnAnswer(t *testing.T) {
	away := cerrors.ErrorDatastoreError{Err: context.DeadlineExceeded, Identifier: "ClusterInformation(default)"}
	if !apierrors.IsInvalid(away) {
		t.Fatal("libcalico-go's datastore error no longer reads as invalid: this test can go")
	}
	if final(away) {
		t.Fatal("an etcd out of reach taken as a final answer")
	}
	notFound := apierrors.NewNotFound(schema.GroupResource{Resource: "pods"}, "db-0")
	if !final(notFound) || !final(cerrors.ErrorDatastoreError{Err: notFound}) {
		t.Fatal("the API server's not-found is an answer, wrapped or not")
	}
}

// A release is judged by its reservation as the samples showed it before
// the release: the controller may write the same record again after it
// (its coverage of one teardown, again), stamped only later; that later
// stamp does not date the release.
func TestCheckerJudgesTheEntryAsItWas(t *testing.T) {
	h := newHistory()
	t0 := time.Now().Add(-time.Minute)
	h.Record(Event{Op: opDel, Pod: casePod, Node: "n1", Sandbox: "aaaa", IPs: []string{caseIP}, Selected: true, Owner: "uid-1", Attempt: 1}, t0)
	rel := Event{Op: opReleased, Pod: casePod, Node: "n1", Sandbox: "aaaa", IPs: []string{caseIP}, Reason: "ttl", Value: "agent-away"}
	h.Record(rel, t0.Add(20500*time.Millisecond))
	var told []string
	k := &checker{
		cfg: Config{TTL: 20 * time.Second, MaxCount: 6}, ns: "ns", hist: h, out: func(s string) { told = append(told, s) },
		entries: map[string]*seen{}, told: map[string]bool{}, judged: map[int]bool{}, unchecked: map[string]int{},
		logs: &logs{tails: map[string]*tail{}},
	}
	cover := reserve.Entry{IP: caseIP, Pod: "db-0", Namespace: "ns", Node: "n1", Sandbox: "aaaa", Reason: "agent-away", ReservedAt: t0, Seen: t0}
	again := cover
	again.Seen = t0.Add(21 * time.Second)
	k.took(&sample{T0: t0.Add(16 * time.Second), T1: t0.Add(16 * time.Second), Entries: []reserve.Entry{cover}})
	k.took(&sample{T0: t0.Add(22 * time.Second), T1: t0.Add(22 * time.Second), Entries: []reserve.Entry{again}})
	k.round(true)
	for _, v := range k.violations {
		if v.Kind == vUnjustified {
			t.Fatalf("the release judged by the entry written after it: %s", strings.Join(told, "\n"))
		}
	}
	if e, _ := k.entryFor("n1", caseIP, casePod, "aaaa", "agent-away", t0.Add(25*time.Second)); !e.Seen.Equal(again.Seen) {
		t.Fatalf("after the second sample: %+v, want the entry as it was then", e)
	}
}
