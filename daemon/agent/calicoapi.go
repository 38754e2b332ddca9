package agent

import (
	"errors"
	"fmt"

	"k8s.io/client-go/discovery"

	"github.com/capo-net/capo/pkg/calico/apigroup"
	"github.com/capo-net/capo/pkg/calico/gate"
	"github.com/capo-net/capo/pkg/journal"
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

// newGate is the agent's gate on Calico: the one check on disc and the
// node's calico_api_group (netconf), then the lock; its prober runs it.
func newGate(disc discovery.DiscoveryInterface, netconf func() string, lock *gate.Lock) *gate.Gate {
	return gate.New(disc, netconf, lock, probeEvery)
}

// replayGroup keeps a journaled teardown whose call named another Calico
// API group than this agent decided by discovery alone: nothing tells it
// which is the node's. An agent told its group (CALICO_API_GROUP, the
// node's calico_api_group) replays in that group (apigroup.InGroup).
func replayGroup(rec *journal.Record) error {
	m, ok := apigroup.InForce()
	if !ok || m.Source != apigroup.SourceDiscovery {
		return nil
	}
	if err := apigroup.Agrees(m, rec.Request.CalicoAPIGroup); err != nil {
		return fmt.Errorf("the journaled call used Calico's API group %s, this agent %s: set %s to the node's group: %w", rec.Request.CalicoAPIGroup, m, apigroup.EnvGroup, err)
	}
	return nil
}
