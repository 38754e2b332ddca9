package robust

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/capo-net/capo/pkg/pause"
	"github.com/capo-net/capo/pkg/reserve"
)

// The invariants, each a kind of violation.
const (
	vFreeUnreserved = "free-and-unreserved"    // a selected pod's address free in Calico with no reservation
	vTwoPods        = "held-by-two-pods"       // an address given to a pod while another holds it, or capo owes it to another
	vLeftReserved   = "reservation-left"       // once settled, a pod holds its address and capo still reserves it for it
	vDelFailed      = "del-failed"             // a DEL failed where the runtime is not meant to retry, or never succeeded
	vUnjustified    = "release-without-reason" // a release whose reason was not true when it was made
	vNotSettled     = "not-settled"            // once the faults are gone, a journaled DEL is never replayed
	vUndone         = "release-by-hand-undone" // a reservation released by hand written again for the same teardown
)

// Violation is one broken invariant.
type Violation struct {
	Kind  string
	At    time.Time
	What  string
	Known string // a known defect being fixed apart: why it is not counted
}

// checker polls Calico's state while the run goes on and holds it, and
// the history, to the invariants.
type checker struct {
	c    *cluster
	cfg  Config
	ns   string // the run's pods' namespace
	hist *History
	logs *logs
	out  func(string) // where a violation is told as it is found

	mu         sync.Mutex
	pending    []*sample // taken, not yet judged
	samples    int
	sampleErrs int
	counts     []countAt        // reservations held, by sample
	entries    map[string]*seen // every reservation any sample saw
	violations []Violation
	texts      []string        // what was told of them
	told       map[string]bool // violations told, by what they are about
	judged     map[int]bool    // events judged, by sequence number
	unchecked  map[string]int  // releases whose reason no sample or teardown could check, by reason
}

type countAt struct {
	from, at time.Time // the sample's start and end
	n        int
}

// seen is a reservation as samples saw it: one record of the store (its
// node, address, pod and write time), which the controller stamps after
// its write (Seen), and may write again the same (its coverage of one
// teardown, again after a release).
type seen struct {
	e           reserve.Entry
	first, last time.Time
	earlier     []version // what samples showed of it before e
}

// version is what samples showed of a reservation until a time.
type version struct {
	e     reserve.Entry
	until time.Time
}

// asOf is the reservation as the last sample before t showed it (its
// first, if none did).
func (s *seen) asOf(t time.Time) reserve.Entry {
	for _, v := range s.earlier {
		if v.until.After(t) {
			return v.e
		}
	}
	return s.e
}

// evalLag is how far behind the present the checker judges, so that what
// happened before a moment is in the history (logs read, ADDs ended).
const evalLag = 3 * time.Second

func newChecker(c *cluster, out func(string)) *checker {
	return &checker{
		c: c, cfg: c.cfg, ns: c.ns, hist: c.hist, logs: newLogs(c), out: out,
		entries: map[string]*seen{}, told: map[string]bool{}, judged: map[int]bool{}, unchecked: map[string]int{},
	}
}

// run samples every cfg.SampleEvery and judges every second, until ctx ends.
func (k *checker) run(ctx context.Context) {
	go func() {
		for pause.Sleep(ctx, time.Second) {
			k.round(false)
		}
	}()
	for pause.Sleep(ctx, k.cfg.SampleEvery) {
		k.sample(ctx)
	}
}

func (k *checker) sample(ctx context.Context) {
	s, err := k.c.take(ctx)
	k.mu.Lock()
	defer k.mu.Unlock()
	if err != nil {
		k.sampleErrs++
		return
	}
	k.samples++
	k.c.latest.Store(s)
	k.took(s)
}

// took keeps a sample to judge, its count, and each entry it shows with
// when it was first and last seen.
func (k *checker) took(s *sample) {
	k.pending = append(k.pending, s)
	k.counts = append(k.counts, countAt{s.T0, s.T1, len(s.Entries)})
	for _, e := range s.Entries {
		key := fmt.Sprintf("%s|%s|%s/%s|%d", e.Node, e.IP, e.Namespace, e.Pod, e.ReservedAt.UnixNano())
		if old, ok := k.entries[key]; ok {
			if e != old.e {
				old.earlier = append(old.earlier, version{e: old.e, until: s.T1})
			}
			old.e, old.last = e, s.T1
		} else {
			k.entries[key] = &seen{e: e, first: s.T1, last: s.T1}
		}
	}
}

// round reads the logs and judges what is old enough (everything, when
// final).
func (k *checker) round(final bool) {
	k.logs.read()
	horizon := time.Now().Add(-evalLag)
	if final {
		horizon = time.Now()
	}
	ix := buildIndex(k.hist.Snapshot())
	k.mu.Lock()
	defer k.mu.Unlock()
	k.judgeSamples(ix, horizon, final)
	for _, e := range ix.evs {
		if k.judged[e.Seq] || e.End.IsZero() || e.End.After(horizon) {
			continue
		}
		k.judged[e.Seq] = true
		switch {
		case e.Op == opAdd && e.Err == "":
			k.judgeAdd(ix, e)
		case e.Op == opDel && e.Err != "":
			k.judgeDel(ix, e)
		case e.Op == opReleased:
			k.judgeRelease(ix, e)
		}
	}
}

// violate records a violation once per key, and tells it with the
// history around it.
func (k *checker) violate(kind, key string, at time.Time, what string) {
	if k.told[kind+"/"+key] {
		return
	}
	k.told[kind+"/"+key] = true
	v := Violation{Kind: kind, At: at, What: what}
	v.Known = knownDefect(v)
	k.violations = append(k.violations, v)
	var b strings.Builder
	label := "VIOLATION"
	if v.Known != "" {
		label = "known defect (" + v.Known + ")"
	}
	fmt.Fprintf(&b, "robust: %s %s at %s: %s\n  seed %d; replay: %s\n", label, kind, k.hist.At(at), what, k.cfg.Seed, k.cfg.Replay)
	if k.cfg.AgentFailpoints != "" {
		fmt.Fprintf(&b, "  (expected: %s is armed in every agent, to prove the checker)\n", k.cfg.AgentFailpoints)
	}
	b.WriteString("  history around it:\n")
	k.hist.Dump(&b, at, 6*time.Second, 3*time.Second, 40)
	k.texts = append(k.texts, b.String())
	k.out(b.String())
}

// Violations are those found so far.
func (k *checker) Violations() []Violation {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]Violation(nil), k.violations...)
}
