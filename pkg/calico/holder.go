// Package calico is capo's one home for talking to Calico. This package
// holds what capo learns from Calico as plain values, for the packages that
// decide on it without reaching Calico (pkg/returns, pkg/capoadopt); the
// reading and checking is in its subpackages:
//
//   - apigroup: which API group Calico keeps its resources in, and whether
//     capo can use Calico there now (the one check);
//   - gate: holds every read and write back while that check fails or
//     Calico has locked its datastore (both daemons);
//   - ipam: who holds an address, a handle's addresses, an address's block;
//   - client: the Calico client capo reads and writes through, in every
//     datastore and group.
package calico

import (
	"fmt"
	"time"
)

// Holder is the allocation an address belongs to.
type Holder struct {
	Handle    string
	Namespace string // the pod's, as the calico plugin recorded it
	Pod       string
	Node      string // where it was assigned, as calico-ipam recorded it ("node")
	// Cooling is an address Calico released into its IP cooldown
	// (IPAMConfiguration ipCooldownSeconds, Calico 3.33+): it is nobody's,
	// no handle holds it, and calico-ipam assigns it to no one, its old
	// pod included, until it has cooled; then it is free.
	Cooling    bool
	ReleasedAt time.Time // when it was released, for a cooling address
}

// Is reports whether h is the given pod's allocation.
func (h *Holder) Is(namespace, pod string) bool {
	return h != nil && h.Namespace == namespace && h.Pod == pod
}

// CoolingError is a reader's answer for an address in Calico's IP
// cooldown: Calico keeps the allocation, marked released (releasedAt), and
// pointing at no handle, so that it is neither free nor anyone's.
type CoolingError struct {
	IP         string
	ReleasedAt time.Time
}

func (e *CoolingError) Error() string {
	return fmt.Sprintf("%s is cooling in Calico's IPAM since %s (ipCooldownSeconds): released, assigned to no one until it has cooled", e.IP, e.ReleasedAt.Format(time.RFC3339))
}
