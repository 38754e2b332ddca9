package capoadopt

import (
	"fmt"
	"slices"
	"strings"

	"github.com/capo-net/capo/pkg/calico"
	"github.com/capo-net/capo/pkg/reserve"
)

// Exclude drops the candidates Calico IPAM has allocated since to anything
// but the pod Capo reserved them for: a reservation there holds nothing
// (the address is in use) and, once that pod goes, would wrongly keep its
// address from the pool. An address still allocated to Capo's own pod is a
// teardown not finished yet (Capo reserves on the API delete, before the
// sandbox goes): adopted. holders has an entry for every candidate's
// address; nil means free.
func Exclude(cands []Candidate, holders map[string]*calico.Holder) ([]Candidate, []Skipped) {
	var keep []Candidate
	var skipped []Skipped
	for _, c := range cands {
		h := holders[c.IP]
		switch {
		case h == nil, h.Cooling: // cooling in Calico's IP cooldown: free once cooled
			keep = append(keep, c)
		case c.Pod != "" && h.Is(c.Namespace, c.Pod):
			if c.Note == "" {
				c.Note = "still allocated to that pod: its teardown is not done"
			}
			keep = append(keep, c)
		default:
			skipped = append(skipped, Skipped{Addr: c.IP, Why: "allocated since to " + holderText(h)})
		}
	}
	return keep, skipped
}

func holderText(h *calico.Holder) string {
	if h.Pod != "" {
		return fmt.Sprintf("pod %s/%s", h.Namespace, h.Pod)
	}
	return fmt.Sprintf("handle %q", h.Handle)
}

func sortSkipped(s []Skipped) {
	slices.SortFunc(s, func(a, b Skipped) int {
		if c := reserve.CompareAddr(a.Addr, b.Addr); c != 0 {
			return c
		}
		return strings.Compare(a.Why, b.Why)
	})
}

// ByNode groups candidates by the node they are held for, the unit of a
// store write.
func ByNode(cands []Candidate) map[string][]reserve.Entry {
	out := map[string][]reserve.Entry{}
	for _, c := range cands {
		out[c.Node] = append(out[c.Node], c.Entry)
	}
	return out
}
