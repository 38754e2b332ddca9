package readiness

import (
	"errors"

	"k8s.io/client-go/discovery"

	"github.com/capo-net/capo/pkg/calico/apigroup"
	"github.com/capo-net/capo/pkg/calico/gate"
)

// isAPIProblem tells what Calico's check found wrong (a type not served, a
// group this build cannot work in, the node's calico_api_group switched,
// Calico's datastore locked or its lock unknown) from a check that could
// not be made (discovery failed), which the readiness words as a failed
// write is. Either closes the gate.
func isAPIProblem(err error) bool {
	return apigroup.IsNotServed(err) || errors.As(err, new(*apigroup.UnsupportedError)) || errors.As(err, new(*apigroup.MismatchError)) ||
		gate.IsLocked(err)
}

// NewGate is the agent's gate on Calico: the one check on disc and the
// node's calico_api_group (netconf), then the lock; its prober runs it.
func NewGate(disc discovery.DiscoveryInterface, netconf func() string, lock *gate.Lock) *gate.Gate {
	return gate.New(disc, netconf, lock, probeEvery)
}
