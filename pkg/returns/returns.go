// Package returns decides whether a StatefulSet pod that starts again gets
// back the addresses capo holds for it. It is pure: the pod, the
// reservations and what Calico says about each address go in; an offer, or
// the reason there is none, comes out. The agent asks it on the ADD, capoctl
// explain asks it to tell an operator.
package returns

import (
	"fmt"
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/capo-net/capo/pkg/config"
	"github.com/capo-net/capo/pkg/owners"
	"github.com/capo-net/capo/pkg/reserve"
	"github.com/capo-net/capo/pkg/selection"
)

// PodAnnotation set to Disabled on a pod opts it out: it comes back with a
// fresh address, and its reservation ends as any other does.
const PodAnnotation = "capo.io/return-address"

// Disabled is PodAnnotation's opt-out value.
const Disabled = "disabled"

// Reason is why addresses are not given back, in one bounded word for
// metrics; the sentence beside it says it to a person.
type Reason string

const (
	NotCandidate   Reason = "not-candidate"     // not a selected StatefulSet pod, opted out, or returnAddress off
	NothingHeld    Reason = "nothing-held"      // no reservation for this pod
	Allocated      Reason = "allocated"         // Calico has the address allocated (another pod, or the old sandbox still)
	NoPool         Reason = "no-pool"           // no enabled pool for workloads contains it
	PoolNotForNode Reason = "pool-not-for-node" // the pool no longer selects this node, or the pod's pool annotation excludes it
	OtherNode      Reason = "other-node"        // held for another node and returnAddress is sameNode
	StrictAffinity Reason = "strict-affinity"   // Calico assigns no address from another node's block
	NotRouted      Reason = "not-routed"        // Calico would not route the borrowed address
	Families       Reason = "families"          // held for fewer address families than the pod is given
	Refused        Reason = "refused"           // calico-ipam refused the requested address
	Unreadable     Reason = "unreadable"        // the datastore could not be read in time
	HeldForOther   Reason = "held-for-another"  // the address is also reserved for another pod's identity
	Cooling        Reason = "cooling"           // Calico's ipCooldownSeconds keeps the released address to its old sandbox
	ReclaimFailed  Reason = "reclaim-failed"    // calico-ipam's DEL of the member's predecessor on a lost node failed
)

// Reasons lists every Reason, for metrics.
var Reasons = []Reason{NotCandidate, NothingHeld, Allocated, NoPool, PoolNotForNode, OtherNode, StrictAffinity, NotRouted, Families, Refused, Unreadable, HeldForOther, Cooling, ReclaimFailed}

// Candidate reports whether pod may get addresses back, or why not:
// selected on this node, not opted out, with returnAddress on. d is the
// selection decision for pod on the node it starts on. Which addresses
// are its own is Held's to say.
func Candidate(mode config.ReturnMode, pod *corev1.Pod, d selection.Decision) (bool, string) {
	switch {
	case mode == config.ReturnOff:
		return false, "returnAddress is off"
	case pod == nil:
		return false, "the pod object is unknown"
	case pod.Annotations[PodAnnotation] == Disabled:
		return false, fmt.Sprintf("pod annotation %s=%s", PodAnnotation, Disabled)
	case d.Verdict != selection.Selected:
		return false, "not selected: " + d.Rule
	}
	return true, ""
}

// setOf is the controller of pod, or nil: a StatefulSet (apps/v1's,
// Kruise's) or any other controller with stable identities.
func setOf(pod *corev1.Pod) *metav1.OwnerReference {
	ref := metav1.GetControllerOf(pod)
	if ref == nil || ref.UID == "" {
		return nil
	}
	return ref
}

// Held picks the reservations made for pod's identity: the same pod (its
// UID: a sandbox re-created under a running pod), or the same namespace
// and name under the same controller (its kind and UID: a set deleted and
// re-created inherits nothing). Only a controller with stable identities
// (a StatefulSet, apps/v1's or Kruise's, or one alike) brings a pod back
// under its name; a ReplicaSet's or a Job's pods have generated names, so
// no kind needs listing here. Of several for one family (the pod lost addresses more than
// once), the latest teardown's; IPv4 first.
func Held(entries []reserve.Entry, pod *corev1.Pod) []reserve.Entry {
	if pod == nil {
		return nil
	}
	var v4, v6 *reserve.Entry
	for i := range entries {
		e := &entries[i]
		addr, err := netip.ParseAddr(e.IP)
		if err != nil || !Owns(pod, *e) {
			continue
		}
		best := &v4
		if addr.Is6() {
			best = &v6
		}
		if *best == nil || e.ReservedAt.After((*best).ReservedAt) {
			*best = e
		}
	}
	var out []reserve.Entry
	for _, e := range []*reserve.Entry{v4, v6} {
		if e != nil {
			out = append(out, *e)
		}
	}
	return out
}

// Owns reports whether e was reserved for pod's identity (see Held).
func Owns(pod *corev1.Pod, e reserve.Entry) bool {
	if e.PodUID != "" && e.PodUID == string(pod.UID) {
		return true
	}
	set := setOf(pod)
	return set != nil && e.Namespace == pod.Namespace && e.Pod == pod.Name && e.OwnerKind == owners.KeyOf(*set) && e.OwnerUID == string(set.UID)
}

// IPs are the entries' addresses.
func IPs(es []reserve.Entry) []string {
	out := make([]string, 0, len(es))
	for _, e := range es {
		out = append(out, e.IP)
	}
	return slices.Clip(out)
}

// HeldForAnother says why held may not be given back to pod when an
// address in it is also reserved, on some node, for another identity (a
// lost node's teardown reserved by capo-controller, an operator's entry):
// that reservation is someone else's promise. "" when none is.
func HeldForAnother(held, all []reserve.Entry, pod *corev1.Pod) (Reason, string) {
	for _, h := range held {
		for _, o := range all {
			if o.IP == h.IP && !Owns(pod, o) {
				return HeldForOther, fmt.Sprintf("%s is also reserved for %s (node %s, %s)", h.IP, who(o), o.Node, o.Reason)
			}
		}
	}
	return "", ""
}

func who(e reserve.Entry) string {
	if e.Pod == "" {
		return "an entry with no pod"
	}
	return e.Namespace + "/" + e.Pod
}
