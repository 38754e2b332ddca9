package robust

import (
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/capo-net/capo/pkg/reserve"
	"github.com/capo-net/capo/test/testbed"
)

// index is the history arranged for the checker, rebuilt each round.
type index struct {
	evs      []Event
	handles  map[string]string        // Calico handle -> the pod whose sandbox it is
	adds     map[string][]Event       // address -> successful ADDs that got it
	firstDel map[string]Event         // sandbox -> its first DEL attempt
	oblig    map[string][]*obligation // address -> what capo owes its selected pods
	faults   []Event
	byHand   map[string][]handRelease // address -> its releases by hand
}

// handRelease is a reservation an operator had released (capoctl, or the
// controller answering the release ConfigMap), and the teardown it was for.
type handRelease struct {
	pod, sandbox string
	// at is when the release began; done, when it had surely landed (a
	// capoctl run that retries through API errors may take seconds, and
	// the entry it ends is still there meanwhile).
	at, done time.Time
}

// obligation: a selected pod's sandbox holding ip is being torn down, so
// from then on ip is reserved for the pod or still allocated to it, until
// a release ends the reservation or the pod has the address back.
type obligation struct {
	pod, ip, node, owner, sandbox string
	open                          time.Time // the teardown's first DEL began
	bypass                        bool      // a DEL of it ran through a conflist without capo-ipam
	discharged                    time.Time // zero: still owed
	by                            string
}

func (o *obligation) String() string {
	s := o.ip + " of " + o.pod + " (sandbox " + short(o.sandbox) + " on " + o.node + ")"
	if o.bypass {
		s += ", torn down through a conflist without capo-ipam"
	}
	return s
}

// inForce: owed over the whole of [from, to] (a discharge logged a little
// after it happened counts as at to).
func (o *obligation) inForce(from, to time.Time) bool {
	return !o.open.After(from) && (o.discharged.IsZero() || o.discharged.After(to.Add(logSlack)))
}

// logSlack covers the moment between a release and its log line, and the
// clocks of one machine read by different processes.
const logSlack = 500 * time.Millisecond

func buildIndex(evs []Event) *index {
	ix := &index{evs: evs, handles: map[string]string{}, adds: map[string][]Event{}, firstDel: map[string]Event{}, oblig: map[string][]*obligation{}}
	slices.SortStableFunc(ix.evs, func(a, b Event) int { return a.Start.Compare(b.Start) })
	for _, e := range ix.evs {
		switch e.Op {
		case opAdd:
			ix.handles[testbed.NetworkName+"."+e.Sandbox] = e.Pod
			if e.Err == "" && !e.End.IsZero() {
				for _, ip := range e.IPs {
					ix.adds[ip] = append(ix.adds[ip], e)
				}
			}
		case opDel:
			ix.handles[testbed.NetworkName+"."+e.Sandbox] = e.Pod
			ix.del(e)
		case opFault:
			ix.faults = append(ix.faults, e)
		}
	}
	ix.handReleases()
	ix.discharge()
	return ix
}

// handReleases finds every release by hand and the teardown it ended the
// reservation of.
func (ix *index) handReleases() {
	ix.byHand = map[string][]handRelease{}
	for _, e := range ix.evs {
		byHand := e.Op == opReleased && e.Reason == "manual" || e.Op == opCapoctl && ends(e, &obligation{}) != ""
		if !byHand || e.Value == reserve.ReasonCNIRewrite {
			// A hold (calico-node replaced) names no teardown: its
			// sandbox's later DEL is reserved again, as it should be.
			continue
		}
		ip, done := firstIP(e.IPs), e.End
		if done.Before(e.Start) {
			done = e.Start
		}
		switch o := ix.owed(ip, e.Pod, e.Start); {
		case e.Sandbox != "": // the teardown whose entry it released
			ix.byHand[ip] = append(ix.byHand[ip], handRelease{pod: e.Pod, sandbox: e.Sandbox, at: e.Start, done: done})
		case o != nil:
			ix.byHand[ip] = append(ix.byHand[ip], handRelease{pod: e.Pod, sandbox: o.sandbox, at: e.Start, done: done})
		}
	}
}

func (ix *index) del(e Event) {
	if e.Attempt == 1 {
		ix.firstDel[e.Sandbox] = e
		if e.Selected {
			for _, ip := range e.IPs {
				ix.oblig[ip] = append(ix.oblig[ip], &obligation{pod: e.Pod, ip: ip, node: e.Node, owner: e.Owner, sandbox: e.Sandbox, open: e.Start, bypass: e.Bypass})
			}
		}
		return
	}
	if e.Bypass { // a retry through a rewritten conflist
		for _, o := range ix.oblig[firstIP(e.IPs)] {
			if o.sandbox == e.Sandbox {
				o.bypass = true
			}
		}
	}
}

func firstIP(ips []string) string {
	if len(ips) == 0 {
		return ""
	}
	return ips[0]
}

var releasedCount = regexp.MustCompile(`released (\d+)`)

// discharge finds, for each obligation, the first thing after it opened
// that ends it: capo's release of the address (any reason: whether the
// reason held is checked apart), an operator's capoctl release, or the
// pod's own new sandbox getting the address back.
func (ix *index) discharge() {
	ix.releasedBeforeTeardown()
	for _, e := range ix.evs {
		for _, ip := range e.IPs {
			for _, o := range ix.oblig[ip] {
				if !o.discharged.IsZero() || e.Start.Before(o.open) {
					continue
				}
				if by := ends(e, o); by != "" {
					o.discharged, o.by = e.Start, by
				}
			}
		}
	}
}

// releasedBeforeTeardown discharges, as it opens, a teardown whose
// reservation an operator had released by hand before its first DEL: the
// controller reserves for a node whose agent is away before the sandbox
// is torn down, and the release sticks for that sandbox, so capo rightly
// does not reserve its DEL again.
func (ix *index) releasedBeforeTeardown() {
	for ip, obls := range ix.oblig {
		for _, o := range obls {
			for _, h := range ix.byHand[ip] {
				if h.pod == o.pod && h.at.Before(o.open) && reserve.SandboxOf(h.sandbox) == reserve.SandboxOf(o.sandbox) &&
					o.open.Sub(h.at) < reserve.ReleasedByHandKept {
					o.discharged, o.by = o.open, "released by hand before its teardown"
				}
			}
		}
	}
}

func ends(e Event, o *obligation) string {
	switch {
	case e.Op == opReleased:
		return "released (" + e.Reason + ")"
	case e.Op == opCapoctl && e.Err == "":
		if m := releasedCount.FindStringSubmatch(e.Detail); m != nil && m[1] != "0" {
			return "capoctl release"
		}
	case e.Op == opAdd && e.Err == "" && !e.End.IsZero() && e.Pod == o.pod:
		return "the pod got it back"
	}
	return ""
}

// live reports whether the sandbox of an ADD had no DEL begun by t.
func (ix *index) live(add Event, t time.Time) bool {
	d, ok := ix.firstDel[add.Sandbox]
	return !ok || d.Start.After(t)
}

// faultDuring reports whether a fault of one of kinds was in force at any
// moment of [from, to].
func (ix *index) faultDuring(kinds []string, from, to time.Time) bool {
	for _, f := range ix.faults {
		end := f.End
		if end.IsZero() {
			end = time.Now()
		}
		if slices.Contains(kinds, faultKind(f)) && !f.Start.After(to) && !end.Before(from) {
			return true
		}
	}
	return false
}

// faultKind is a fault event's kind: the first word of its value.
func faultKind(f Event) string { return strings.Fields(f.Value + " ?")[0] }

// ordinal is a member's ordinal: "<set>-<n>".
func ordinal(pod string) (set string, n int, ok bool) {
	_, name, _ := strings.Cut(pod, "/")
	i := strings.LastIndexByte(name, '-')
	if i < 0 {
		return "", 0, false
	}
	n, err := strconv.Atoi(name[i+1:])
	return name[:i], n, err == nil
}
