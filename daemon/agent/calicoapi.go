package agent

import (
	"errors"

	"k8s.io/client-go/discovery"

	"github.com/capo-net/capo/pkg/calico/apigroup"
	"github.com/capo-net/capo/pkg/calico/gate"
)

// isAPIProblem tells the failures of Calico's check that close the gate
// (a type not served, a group this build cannot work in, the node's
// calico_api_group switched, Calico's datastore locked: the agent is not
// ready and refuses to write until a later check passes) from a failed
// probe, which the readiness records as such.
func isAPIProblem(err error) bool {
	return apigroup.IsNotServed(err) || errors.As(err, new(*apigroup.UnsupportedError)) || errors.As(err, new(*apigroup.MismatchError)) ||
		gate.IsLocked(err)
}

// newGate is the agent's gate on Calico: the one check on disc and the
// node's calico_api_group (netconf), then the lock. A failed probe (not an
// API problem) leaves its verdict standing: the readiness records it.
func newGate(disc discovery.DiscoveryInterface, netconf func() string, lock *gate.Lock) *gate.Gate {
	g := gate.New(disc, netconf, lock, probeEvery)
	g.Transient = func(err error) bool { return !isAPIProblem(err) }
	return g
}
