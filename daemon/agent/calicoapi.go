package agent

import (
	"context"
	"errors"
	"log/slog"

	cnet "github.com/projectcalico/calico/libcalico-go/lib/net"
	"k8s.io/client-go/discovery"

	"github.com/capo-net/capo/pkg/calico/apigroup"
	"github.com/capo-net/capo/pkg/calico/gate"
	"github.com/capo-net/capo/pkg/reserve"
)

// errAPINotChecked holds writes back until the prober's first check of
// Calico's API group: a write in a group Calico does not read is a loss.
var errAPINotChecked = apigroup.ErrNotChecked

// apiChecker is gate.Check on every Calico type the agent touches.
// A *NotServedError, *UnsupportedError, *MismatchError or *LockedError is
// sticky (the agent is not ready and refuses to write until a later check
// passes); any other error is a failed probe.
func apiChecker(disc discovery.DiscoveryInterface, netconf func() string, lock func(context.Context) error) func(context.Context) error {
	return gate.Check(disc, apigroup.All, netconf, lock)
}

// isAPIProblem tells the sticky failures from a transient one.
func isAPIProblem(err error) bool {
	return apigroup.IsNotServed(err) || errors.As(err, new(*apigroup.UnsupportedError)) || errors.As(err, new(*apigroup.MismatchError)) ||
		apigroup.IsLocked(err)
}

// checkAPI runs the check and records its outcome in r.
func checkAPI(ctx context.Context, check func(context.Context) error, r *readiness) error {
	err := check(ctx)
	switch {
	case err == nil:
		r.calicoAPI(nil)
	case isAPIProblem(err):
		r.calicoAPI(err)
	default:
		r.failed(err)
	}
	return err
}

// calicoAPI records the outcome of a check of Calico's API group.
func (r *readiness) calicoAPI(err error) {
	r.mu.Lock()
	was := r.apiErr
	r.apiErr = err
	r.mu.Unlock()
	switch {
	case err != nil && (was == nil || was.Error() != err.Error()) && !errors.Is(err, errAPINotChecked):
		slog.Error("Calico's API group cannot be used: not ready, and no reservation is written", "err", err)
	case err == nil && was != nil && !errors.Is(was, errAPINotChecked):
		slog.Info("Calico's API group serves every type capo uses again", "after", was.Error())
	}
	r.export()
}

// apiError is the standing Calico API problem, if any.
func (r *readiness) apiError() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.apiErr
}

// guard refuses a write while the Calico API group is not usable: the
// shim then journals the DEL and keeps the address allocated.
func (s watchedStore) guard() error { return s.r.apiError() }

var _ reserve.Store = watchedStore{}

// gatedIPAM is Calico IPAM behind the readiness's API check: while Calico's
// group cannot be used, "this handle has no addresses" or "nobody holds
// this address" is an error (capo-ipam journals, the drain retries), never
// an answer that lets an address be released unreserved.
type gatedIPAM struct {
	IPAM
	r *readiness
}

func (g gatedIPAM) IPsByHandle(ctx context.Context, handleID string) ([]cnet.IP, error) {
	if err := g.r.apiError(); err != nil {
		return nil, err
	}
	return g.IPAM.IPsByHandle(ctx, handleID)
}

func (g gatedIPAM) GetAssignmentAttributes(ctx context.Context, addr cnet.IP) (map[string]string, *string, error) {
	if err := g.r.apiError(); err != nil {
		return nil, nil, err
	}
	return g.IPAM.GetAssignmentAttributes(ctx, addr)
}
