package robust

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"time"
)

// What the history records: the traffic's operations on the cluster, the
// faults, and what capo was seen to do (its releases, read from its logs).
const (
	opAdd        = "ADD"             // a sandbox set up through the node's CNI chain
	opDel        = "DEL"             // a sandbox torn down (one attempt; the runtime retries)
	opCreatePod  = "create-pod"      // a pod object made, bound to its node
	opDeletePod  = "delete-pod"      // the pod object deleted (force)
	opEvict      = "evict"           // the kubelet's eviction: status Failed, reason Evicted
	opScale      = "scale"           // a StatefulSet's replicas changed
	opDeleteSet  = "delete-set"      // a StatefulSet deleted
	opCreateSet  = "create-set"      // a StatefulSet made (anew: a new UID)
	opSetTTL     = "set-ttl"         // a StatefulSet's capo.io/ip-reserve-time changed
	opCapoctl    = "capoctl-release" // capoctl release, as an operator runs it
	opAskRelease = "ask-release"     // a release by hand through the release ConfigMap
	opMode       = "return-mode"     // returnAddress changed
	opFault      = "fault"           // a fault, from its injection to its end
	opReleased   = "released"        // capo says it ended a reservation (its log)
	opCrash      = "crash"           // a capo process exited on its own (a failpoint)
	opFailpoint  = "failpoint"       // a failpoint fired (its process's log)
)

// Event is one thing that happened, from Start to End.
type Event struct {
	Seq        int
	Start, End time.Time
	Op         string
	Pod        string // namespace/name
	PodUID     string
	Node       string
	Sandbox    string   // container ID; of a release, the released entry's (its first digits)
	IPs        []string // an ADD's result, a DEL's sandbox's, a release's
	Reason     string   // a release's, as capo logged it
	Value      string   // a set's name, a TTL, a release request, a mode; of a release by hand, the entry's reason
	N          int      // a set's replicas
	Detail     string   // what else says what happened: who, a fault's kind
	Err        string
	// For ADD and DEL: whether capo selects the pod (a StatefulSet
	// member), its set's UID, the DEL's attempt, and whether the conflist
	// it ran through lacked capo-ipam (calico-node had just rewritten it).
	Selected bool
	Owner    string
	Attempt  int
	Bypass   bool
}

func (e *Event) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "#%d %s", e.Seq, e.Op)
	for _, kv := range [][2]string{{"pod", e.Pod}, {"node", e.Node}, {"sandbox", short(e.Sandbox)}, {"ips", strings.Join(e.IPs, ",")}, {"reason", e.Reason}, {"", e.Value}, {"", e.Detail}} {
		switch {
		case kv[1] == "":
		case kv[0] == "":
			fmt.Fprintf(&b, " %s", kv[1])
		default:
			fmt.Fprintf(&b, " %s=%s", kv[0], kv[1])
		}
	}
	if e.Err != "" {
		fmt.Fprintf(&b, " FAILED: %s", firstLine(e.Err, 160))
	}
	return b.String()
}

// History is the run's record, in the order things began.
type History struct {
	mu     sync.Mutex
	start  time.Time
	events []*Event
}

func newHistory() *History { return &History{start: time.Now()} }

// Begin records the start of e now and returns it, to End later.
func (h *History) Begin(e Event) *Event {
	h.mu.Lock()
	defer h.mu.Unlock()
	e.Seq = len(h.events) + 1
	if e.Start.IsZero() {
		e.Start = time.Now()
	}
	ev := &e
	h.events = append(h.events, ev)
	return ev
}

// End records that e ended now, with err.
func (h *History) End(e *Event, err error) { h.EndWith(e, nil, "", err) }

// EndWith records that e ended now with ips (an ADD's result), more
// detail, and err.
func (h *History) EndWith(e *Event, ips []string, detail string, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	e.End = time.Now()
	if ips != nil {
		e.IPs = ips
	}
	if detail != "" {
		e.Detail = strings.TrimSpace(e.Detail + " " + detail)
	}
	if err != nil {
		e.Err = err.Error()
	}
}

// Set changes e, begun, under the history's lock.
func (h *History) Set(e *Event, f func(*Event)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	f(e)
}

// Record is Begin and End at once, at the given time.
func (h *History) Record(e Event, at time.Time) {
	e.Start = at
	ev := h.Begin(e)
	h.mu.Lock()
	ev.End = at
	h.mu.Unlock()
}

// Snapshot is a copy of every event so far.
func (h *History) Snapshot() []Event {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]Event, len(h.events))
	for i, e := range h.events {
		out[i] = *e
	}
	return out
}

// Dump writes the events that overlap [at-before, at+after], by start.
func (h *History) Dump(w io.Writer, at time.Time, before, after time.Duration, limit int) {
	evs := h.Snapshot()
	var in []Event
	for _, e := range evs {
		end := e.End
		if end.IsZero() {
			end = time.Now()
		}
		if !end.Before(at.Add(-before)) && !e.Start.After(at.Add(after)) && e.Op != "" {
			in = append(in, e)
		}
	}
	sort.SliceStable(in, func(i, j int) bool { return in[i].Start.Before(in[j].Start) })
	if len(in) > limit { // keep those nearest the moment
		sort.SliceStable(in, func(i, j int) bool { return dist(in[i].Start, at) < dist(in[j].Start, at) })
		in = in[:limit]
		sort.SliceStable(in, func(i, j int) bool { return in[i].Start.Before(in[j].Start) })
	}
	for _, e := range in {
		fmt.Fprintf(w, "  %s %s\n", h.stamp(e.Start, e.End), e.String())
	}
}

// stamp is an event's time in seconds since the run began.
func (h *History) stamp(start, end time.Time) string {
	s := fmt.Sprintf("%8.3fs", start.Sub(h.start).Seconds())
	if end.IsZero() {
		return s + " (running)  "
	}
	return s + fmt.Sprintf(" +%-9s", end.Sub(start).Round(time.Millisecond))
}

// At is t in seconds since the run began.
func (h *History) At(t time.Time) string { return fmt.Sprintf("%.3fs", t.Sub(h.start).Seconds()) }

func dist(a, b time.Time) time.Duration {
	if d := a.Sub(b); d >= 0 {
		return d
	}
	return b.Sub(a)
}

func short(cid string) string {
	if len(cid) > 12 {
		return cid[:12]
	}
	return cid
}

func firstLine(s string, n int) string {
	s, _, _ = strings.Cut(s, "\n")
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}
