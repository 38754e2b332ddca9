package robust

import (
	"fmt"
	"strings"
	"time"

	"github.com/capo-net/capo/pkg/reserve"
)

// retryFaults are the faults under which a DEL may fail for the runtime
// to retry: Calico's own plugin cannot reach its datastore or refuses a
// locked one, or capo-ipam itself is made to fail.
var retryFaults = []string{fAPIServer, fEtcd, fLock, fPluginFP}

// judgeSamples holds each sample old enough to the first invariant: an
// address capo owes a pod is, at that instant, reserved or still
// allocated to that pod, and allocated to no other. A sample waits while
// an ADD that began before it has not ended (it may be the pod getting
// its address back, which ends what is owed).
func (k *checker) judgeSamples(ix *index, horizon time.Time, final bool) {
	var keep []*sample
	for _, s := range k.pending {
		if s.T1.After(horizon) || !final && addRunning(ix, s.T1) {
			keep = append(keep, s)
			continue
		}
		k.judgeSample(ix, s)
	}
	k.pending = keep
}

// addRunning: an ADD that began by t is still running (for up to its
// timeout; past that it is judged anyway).
func addRunning(ix *index, t time.Time) bool {
	for i := len(ix.evs) - 1; i >= 0; i-- {
		e := ix.evs[i]
		if e.Start.Before(t.Add(-cniTimeout)) {
			return false
		}
		if e.Op == opAdd && e.End.IsZero() && !e.Start.After(t) {
			return true
		}
	}
	return false
}

func (k *checker) judgeSample(ix *index, s *sample) {
	k.judgeSticky(ix, s)
	for ip, obls := range ix.oblig {
		for _, o := range obls {
			if !o.inForce(s.T0, s.T1) {
				continue
			}
			holder := s.Holder[ip]
			switch {
			case holder == "" && !s.reserved(ip):
				k.violate(vFreeUnreserved, o.sandbox+ip, s.T0, fmt.Sprintf("%s is free in Calico and capo holds no reservation of it (sampled %s..%s)", o, k.hist.At(s.T0), k.hist.At(s.T1)))
			case holder != "" && ix.handles[holder] != o.pod:
				k.violate(vTwoPods, o.sandbox+ip+holder, s.T0, fmt.Sprintf("%s is allocated to %s (%s) while capo owes it to %s", ip, holderName(ix, holder), holder, o))
			}
		}
	}
}

// judgeSticky holds a sample to a sixth invariant: a release by hand
// sticks. Once an operator had a teardown's reservation released, that
// teardown (a journaled DEL replayed, a retry) does not reserve the
// address again; entries are stamped to the second, so a write in the
// release's second counts, and only a sample begun after the release had
// surely landed is read.
func (k *checker) judgeSticky(ix *index, s *sample) {
	for _, e := range s.Entries {
		for _, h := range ix.byHand[e.IP] {
			if e.Sandbox == "" || e.Sandbox != reserve.SandboxOf(h.sandbox) || h.pod != e.Namespace+"/"+e.Pod ||
				!s.T0.After(h.done.Add(logSlack)) || e.ReservedAt.Before(h.at.Truncate(time.Second)) {
				continue
			}
			k.violate(vUndone, h.sandbox+e.IP, s.T0, fmt.Sprintf("%s of %s was released by hand at %s, and reserved again for the same teardown (sandbox %s) by %s on %s at %s (reason %s)",
				e.IP, h.pod, k.hist.At(h.at), short(h.sandbox), writer(e), e.Node, e.ReservedAt.Format("15:04:05"), e.Reason))
		}
	}
}

// writer says who writes an entry of that reason.
func writer(e reserve.Entry) string {
	if e.Reason == reserve.ReasonCNIDel {
		return "the agent"
	}
	return "capo-controller"
}

func holderName(ix *index, handle string) string {
	if p, ok := ix.handles[handle]; ok {
		return p
	}
	return "a handle no sandbox of the run has"
}

// judgeAdd holds an ADD's result to the second invariant: no address is
// given to a pod while another pod's sandbox holds it, or while capo owes
// it to another pod.
func (k *checker) judgeAdd(ix *index, add Event) {
	for _, ip := range add.IPs {
		for _, other := range ix.adds[ip] {
			if other.Pod != add.Pod && !other.End.After(add.End) && other.Seq != add.Seq && ix.live(other, add.End) {
				k.violate(vTwoPods, add.Sandbox+ip, add.End, fmt.Sprintf("%s got %s while the live sandbox %s of %s holds it", add.Pod, ip, short(other.Sandbox), other.Pod))
			}
		}
		for _, o := range ix.oblig[ip] {
			if o.pod != add.Pod && o.open.Before(add.End) && (o.discharged.IsZero() || o.discharged.After(add.End.Add(logSlack))) {
				k.violate(vTwoPods, add.Sandbox+ip, add.End, fmt.Sprintf("%s got %s, which capo owes to %s", add.Pod, ip, o))
			}
		}
	}
}

// judgeDel holds a failed DEL attempt to the fourth invariant: it failed
// under a fault that makes the runtime retry, and was not the last try.
func (k *checker) judgeDel(ix *index, d Event) {
	if strings.HasSuffix(d.Detail, giveUp) {
		k.violate(vDelFailed, d.Sandbox, d.End, fmt.Sprintf("the DEL of %s's sandbox %s on %s failed for %s, every retry: %s", d.Pod, short(d.Sandbox), d.Node, delPatience, firstLine(d.Err, 300)))
		return
	}
	if !ix.faultDuring(retryFaults, d.Start.Add(-time.Second), d.End.Add(time.Second)) {
		k.violate(vDelFailed, d.Sandbox, d.Start, fmt.Sprintf("the DEL of %s's sandbox %s on %s failed with no fault that makes the runtime retry: %s", d.Pod, short(d.Sandbox), d.Node, firstLine(d.Err, 300)))
	}
}

// liveSandboxes are the sandboxes set up and never torn down, by the ADD
// that made them.
func liveSandboxes(ix *index) []Event {
	var out []Event
	for _, e := range ix.evs {
		if e.Op == opAdd && e.Err == "" && !e.End.IsZero() && ix.live(e, time.Now()) {
			out = append(out, e)
		}
	}
	return out
}
