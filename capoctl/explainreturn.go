package capoctl

import (
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/capo-net/capo/pkg/config"
	"github.com/capo-net/capo/pkg/returns"
	"github.com/capo-net/capo/pkg/selection"
)

// Event reasons capo-agent records on a returning pod.
const (
	eventReturned    = "AddressReturned"
	eventNotReturned = "AddressNotReturned"
	eventReclaimed   = "AddressReclaimed" // freed from the member's predecessor on a lost node, before its return
)

// explainReturn says whether pod, started again on its node, would get the
// addresses held for it back, and if not why, as far as capo's own rules
// go: Calico can still refuse (the address allocated meanwhile, its pool
// changed), which the agent checks on the ADD and reports in an Event.
func (c *cli) explainReturn(pod *corev1.Pod, d selection.Decision) error {
	mode := c.config().ReturnAddress
	if ok, why := returns.Candidate(mode, pod, d); !ok {
		fmt.Fprintf(c.out, "  address back on return: no (%s)\n", why)
		return nil
	}
	listing, err := c.store.List(c.ctx)
	if err != nil {
		return err
	}
	held := returns.Held(listing.Entries, pod)
	if len(held) == 0 {
		fmt.Fprintln(c.out, "  address back on return: nothing held for this pod's identity (its UID, or its name under the same StatefulSet)")
		return nil
	}
	ips := strings.Join(returns.IPs(held), " and ")
	for _, e := range held {
		if mode == config.ReturnSameNode && e.Node != pod.Spec.NodeName {
			fmt.Fprintf(c.out, "  address back on return: no (%s is held for node %s and returnAddress is %s)\n", e.IP, e.Node, mode)
			return nil
		}
	}
	fmt.Fprintf(c.out, "  address back on return: yes, %s (returnAddress %s), unless Calico has it allocated or its pool no longer fits; the pod's Events say\n", ips, mode)
	if mode == config.ReturnAnyNode {
		fmt.Fprintln(c.out, "    if Calico still has it allocated to this member's earlier sandbox on a node Kubernetes has declared lost (its Node deleted, or tainted unreachable or out-of-service), capo-ipam frees that allocation first (Event AddressReclaimed)")
	}
	return nil
}

// returnEvent is an address given back, or not, as capo-agent recorded it.
type returnEvent struct {
	Pod     string    `json:"pod"`
	Reason  string    `json:"reason"`
	Message string    `json:"message"`
	At      time.Time `json:"at"`
}

// returns lists the agents' Events about returning pods, oldest first: the
// history of addresses given back, which reservations no longer show.
func (c *cli) returns(f filter) ([]returnEvent, error) {
	var out []returnEvent
	for _, reason := range []string{eventReturned, eventNotReturned, eventReclaimed} {
		evs, err := c.kube.CoreV1().Events(f.namespace).List(c.ctx, metav1.ListOptions{FieldSelector: "reason=" + reason})
		if err != nil {
			return nil, fmt.Errorf("reading Events %s: %w", reason, err)
		}
		for _, e := range evs.Items {
			pod := e.InvolvedObject.Namespace + "/" + e.InvolvedObject.Name
			if e.Reason != reason || (f.pod != "" && pod != f.pod) || (f.node != "" && e.Source.Host != f.node) {
				continue
			}
			out = append(out, returnEvent{Pod: pod, Reason: reason, Message: e.Message, At: lastSeen(e)})
		}
	}
	slices.SortStableFunc(out, func(a, b returnEvent) int { return a.At.Compare(b.At) })
	return out, nil
}

func lastSeen(e corev1.Event) time.Time {
	for _, t := range []time.Time{e.LastTimestamp.Time, e.EventTime.Time, e.FirstTimestamp.Time, e.CreationTimestamp.Time} {
		if !t.IsZero() {
			return t
		}
	}
	return time.Time{}
}

// listReturns prints the history of returns alone, for people and for
// scripts.
func (c *cli) listReturns(f filter, o *output) error {
	evs, err := c.returns(f)
	if err != nil {
		return err
	}
	if evs == nil {
		evs = []returnEvent{}
	}
	return o.print(c.out, evs, func(bool) error {
		if len(evs) == 0 {
			fmt.Fprintln(c.out, "(no returns recorded)")
		}
		c.printReturns(evs)
		return nil
	})
}

// printReturns adds the history to list's table.
func (c *cli) printReturns(evs []returnEvent) {
	if len(evs) == 0 {
		return
	}
	fmt.Fprintln(c.out, "\nReturns (capo-agent's Events):")
	w := tabwriter.NewWriter(c.out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "POD\tOUTCOME\tAGE\tMESSAGE")
	for _, e := range evs {
		outcome := map[string]string{eventReturned: "returned", eventNotReturned: "not returned", eventReclaimed: "reclaimed"}[e.Reason]
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", e.Pod, outcome, human(c.now.Sub(e.At)), e.Message)
	}
	_ = w.Flush()
}
