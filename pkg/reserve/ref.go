package reserve

import (
	"fmt"
	"time"
)

// Ref names one reservation: an address held for a node, and which
// teardown's entry it is (the pod, its sandbox, when it was reserved). A
// release or a stamp by Ref touches the entry only while it still is that
// one: an entry written at the same place since (the pod torn down again
// from another sandbox, another pod) is left alone, so that a plan made on
// an older read never ends a newer reservation.
//
// A Ref with Node and IP only names the place, whatever is held there: an
// operator's request by address, or an entry with no metadata (a CIDR
// added by hand), whose Ref is its place anyway.
type Ref struct {
	Node, IP                        string
	Namespace, Pod, PodUID, Sandbox string
	ReservedAt                      int64 // Unix seconds, as stored; 0 when unknown
}

// Ref is the entry's precise name.
func (e Entry) Ref() Ref {
	return Ref{
		Node: e.Node, IP: e.IP, Namespace: e.Namespace, Pod: e.Pod, PodUID: e.PodUID,
		Sandbox: e.Sandbox, ReservedAt: unixOrZero(e.ReservedAt),
	}
}

// Place is where the entry is held: its node and address, whoever's it is.
func (e Entry) Place() Ref { return Ref{Node: e.Node, IP: e.IP} }

// Place is where the reservation is held.
func (r Ref) Place() Ref { return Ref{Node: r.Node, IP: r.IP} }

func unixOrZero(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.Unix()
}

// RefSet is a set of reservations, addresses normalised.
type RefSet map[Ref]bool

// NewRefSet normalises refs; an address that does not parse is an error,
// so that a release which would match nothing says so.
func NewRefSet(refs []Ref) (RefSet, error) {
	s := RefSet{}
	for _, r := range refs {
		addr, err := NormalizeAddr(r.IP)
		if err != nil {
			return nil, fmt.Errorf("reservation of node %q: %w", r.Node, err)
		}
		r.IP = addr
		s[r] = true
	}
	return s, nil
}

// Match is the ref of the set that names e, if any: its own, or its place.
func (s RefSet) Match(e Entry) (Ref, bool) {
	if r := e.Ref(); s[r] {
		return r, true
	}
	if p := e.Place(); s[p] {
		return p, true
	}
	return Ref{}, false
}
