package robust

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// Report is a run's figures and what it found.
type Report struct {
	Seed                  uint64
	Replay                string // the command that replays the run
	Datastore             string
	Traffic, Total        time.Duration
	Ops, OpsFailed        map[string]int // operations, by kind
	Events                int            // operations run
	Faults                map[string]int // injected, by kind
	FaultsNotMade         map[string]int // that could not be injected (another fault in the way)
	ProxyFailures         map[string]int // requests the proxy failed, by kind
	Failpoints            map[string]int // failpoints fired, by point
	Crashes               map[string]int // capo processes that exited on their own, or as they started, by process and why
	Samples, SampleErrors int
	ADDs, ADDsFailed      int
	DELs, DELsFailed      int            // attempts
	Returns               int            // ADDs that gave a pod the address capo held for it
	Releases              map[string]int // capo's releases, by reason
	Unchecked             map[string]int // releases whose reason nothing could check
	Violations            []Violation
	Told                  []string // each violation as told when found: the history around it, the replay
}

func (k *checker) report(ops *opCounts, start, trafficEnd time.Time) *Report {
	c := k.c
	k.mu.Lock()
	defer k.mu.Unlock()
	r := &Report{
		Seed: c.cfg.Seed, Replay: c.cfg.Replay, Datastore: string(c.cfg.Datastore), Traffic: trafficEnd.Sub(start), Total: time.Since(start),
		Ops: ops.ran, OpsFailed: ops.failed, Faults: map[string]int{}, FaultsNotMade: map[string]int{}, ProxyFailures: c.proxy.Injected(),
		Failpoints: map[string]int{}, Crashes: map[string]int{}, Samples: k.samples, SampleErrors: k.sampleErrs,
		Releases: map[string]int{}, Unchecked: k.unchecked, Violations: append([]Violation(nil), k.violations...), Told: append([]string(nil), k.texts...),
	}
	for _, n := range ops.ran {
		r.Events += n
	}
	ix := buildIndex(c.hist.Snapshot())
	for _, e := range ix.evs {
		r.count(ix, e)
	}
	return r
}

func (r *Report) count(ix *index, e Event) {
	switch e.Op {
	case opFault:
		if e.Err != "" {
			r.FaultsNotMade[faultKind(e)]++
		} else {
			r.Faults[faultKind(e)]++
		}
	case opFailpoint:
		r.Failpoints[strings.SplitN(e.Detail, "=", 2)[0]]++
	case opCrash:
		r.Crashes[e.Reason]++
	case opReleased:
		r.Releases[e.Reason]++
	case opAdd:
		r.ADDs++
		if e.Err != "" {
			r.ADDsFailed++
		}
		for _, o := range ix.oblig[firstIP(e.IPs)] {
			if o.pod == e.Pod && o.open.Before(e.Start) && e.Err == "" && o.by == "the pod got it back" && o.discharged.Equal(e.Start) {
				r.Returns++
				break
			}
		}
	case opDel:
		r.DELs++
		if e.Err != "" {
			r.DELsFailed++
		}
	}
}

// Unexpected are the violations not marked as known defects.
func (r *Report) Unexpected() []Violation {
	var out []Violation
	for _, v := range r.Violations {
		if v.Known == "" {
			out = append(out, v)
		}
	}
	return out
}

// Fail fails t for each unexpected violation, naming the seed and the
// replay (the history around each is in the test's log above).
func (r *Report) Fail(t *testing.T) {
	t.Helper()
	for _, v := range r.Unexpected() {
		t.Errorf("robust: seed %d: %s: %s", r.Seed, v.Kind, v.What)
	}
	if len(r.Unexpected()) > 0 {
		t.Errorf("robust: replay: %s", r.Replay)
	}
}

func (r *Report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "\nrobust figures (seed %d, %s datastore): traffic %s, then settled in %s\n", r.Seed, r.Datastore, r.Traffic.Round(time.Second), (r.Total - r.Traffic).Round(time.Second))
	fmt.Fprintf(&b, "  events run %d: %s\n", r.Events, counts(r.Ops, r.OpsFailed))
	fmt.Fprintf(&b, "  CNI: %d ADDs (%d failed, %d returns), %d DEL attempts (%d failed, retried)\n", r.ADDs, r.ADDsFailed, r.Returns, r.DELs, r.DELsFailed)
	fmt.Fprintf(&b, "  faults injected %d: %s\n", sum(r.Faults), counts(r.Faults, nil))
	if len(r.FaultsNotMade) > 0 {
		fmt.Fprintf(&b, "  faults that could not be made (another fault in the way) %d: %s\n", sum(r.FaultsNotMade), counts(r.FaultsNotMade, nil))
	}
	fmt.Fprintf(&b, "  API requests failed by the proxy %d: %s\n", sum(r.ProxyFailures), counts(r.ProxyFailures, nil))
	fmt.Fprintf(&b, "  failpoints fired %d: %s\n", sum(r.Failpoints), counts(r.Failpoints, nil))
	fmt.Fprintf(&b, "  capo processes that exited on their own, or failed to start, %d: %s\n", sum(r.Crashes), counts(r.Crashes, nil))
	fmt.Fprintf(&b, "  capo's releases %d: %s (reason not checkable: %s)\n", sum(r.Releases), counts(r.Releases, nil), counts(r.Unchecked, nil))
	fmt.Fprintf(&b, "  invariant samples taken %d (%d could not be read)\n", r.Samples, r.SampleErrors)
	fmt.Fprintf(&b, "  violations %d", len(r.Unexpected()))
	if known := len(r.Violations) - len(r.Unexpected()); known > 0 {
		fmt.Fprintf(&b, " (and %d of known defects being fixed apart)", known)
	}
	for _, v := range r.Violations {
		fmt.Fprintf(&b, "\n    %s: %s", v.Kind, v.What)
		if v.Known != "" {
			fmt.Fprintf(&b, " [known: %s]", v.Known)
		}
	}
	return b.String() + "\n"
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// counts renders m as "a 3, b 1" (with failures: "a 3 (1 failed)").
func counts(m, failed map[string]int) string {
	if len(m) == 0 {
		return "none"
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		s := fmt.Sprintf("%s %d", k, m[k])
		if failed[k] > 0 {
			s += fmt.Sprintf(" (%d failed)", failed[k])
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, ", ")
}

// opCounts are the operations run, and those that failed, by kind.
type opCounts struct {
	mu          sync.Mutex
	ran, failed map[string]int
}

func (o *opCounts) add(kind string, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.ran[kind]++
	if err != nil {
		o.failed[kind]++
	}
}
