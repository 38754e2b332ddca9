package plugin

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/capo-net/capo/pkg/wire"
)

// Releaser is a delegate that can run its DEL for another sandbox of the
// pod, as that sandbox's own runtime would have: calico-ipam's DEL
// releases the handle <network>.<CNI_CONTAINERID> (cmdDel in
// cni-plugin/pkg/ipamplugin/ipam_plugin.go), with the CNI's credentials.
type Releaser interface {
	ReleaseSandbox(ctx context.Context, conf *NetConf, containerID string) error
}

var _ Releaser = (*ExecDelegate)(nil)

// ReleaseSandbox runs the delegate's DEL with CNI_CONTAINERID=containerID
// and everything else as this call has it (the pod's CNI_ARGS included).
func (d *ExecDelegate) ReleaseSandbox(ctx context.Context, conf *NetConf, containerID string) error {
	d.Stop() // a call started ahead is this sandbox's ADD
	e := *d
	e.Env = withEnv(d.Env, "CNI_CONTAINERID", containerID)
	_, err := e.Invoke(ctx, "DEL", conf)
	return err
}

// Reason capo-ipam reports when a predecessor's allocation could not be
// freed: returns.ReclaimFailed by value (see reasonRefused).
const reasonReclaimFailed = "reclaim-failed"

// reclaim frees the allocations the offer names, each by calico-ipam's DEL
// of its sandbox: the member's own predecessor on a node Kubernetes has
// declared lost, which will never run that DEL. The addresses stay
// reserved meanwhile, so freeing them gives them to no one else. It
// returns the container IDs freed, up to the first that failed.
func reclaim(ctx context.Context, d Delegate, conf *NetConf, rt returning) ([]string, error) {
	rel, ok := d.(Releaser)
	if !ok {
		return nil, errors.New("the delegate cannot release another sandbox")
	}
	var freed []string
	for _, p := range rt.offer.Reclaim {
		if p.ContainerID == "" || p.ContainerID == rt.sandbox.ContainerID || !validContainerID(p.ContainerID) {
			return freed, fmt.Errorf("the agent named sandbox %q to free, which is not another sandbox's container ID", p.ContainerID)
		}
		if err := notHere(rt, p.ContainerID); err != nil {
			return freed, err
		}
		slog.Info("freeing a returning member's address from its predecessor on a lost node", "pod", rt.podName, "ips", rt.offer.IPs, "sandbox", p.ContainerID, "node", p.Node)
		if err := rel.ReleaseSandbox(ctx, conf, p.ContainerID); err != nil {
			return freed, fmt.Errorf("calico-ipam's DEL of sandbox %s (node %s): %w", p.ContainerID, p.Node, err)
		}
		freed = append(freed, p.ContainerID)
	}
	return freed, nil
}

// notHere refuses to free a sandbox this node's capo-ipam recorded at ADD:
// a predecessor on a lost node never has a record here, so an offer that
// names one of this node's sandboxes is not the agent's to make (a process
// that serves the socket in its place could otherwise free any pod's
// allocation on the node).
func notHere(rt returning, containerID string) error {
	if rt.local == nil {
		return errors.New("this node's ADD records cannot be read: no sandbox is freed")
	}
	here, err := rt.local(containerID)
	if err != nil {
		return fmt.Errorf("reading this node's ADD records to check sandbox %s is not one of its own: %w", containerID, err)
	}
	if here {
		slog.Warn("refused to free a sandbox of this node that an offer named: only a lost node's sandbox is freed", "pod", rt.podName, "sandbox", containerID)
		return fmt.Errorf("the offer names sandbox %s, which has an ADD record on this node: it is this node's, not a lost node's, and is not freed", containerID)
	}
	return nil
}

// recordedHere reports whether j holds an ADD record of a sandbox of the
// network, on any interface.
func recordedHere(j Journal, network string) func(string) (bool, error) {
	return func(containerID string) (bool, error) {
		recs, err := j.AddrRecords()
		if err != nil {
			return false, err
		}
		for _, r := range recs {
			if r.Network == network && r.ContainerID == containerID {
				return true, nil
			}
		}
		return false, nil
	}
}

// validContainerID is the CNI spec's rule for a container ID.
func validContainerID(id string) bool {
	for i, c := range id {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || i > 0 && (c == '_' || c == '.' || c == '-')
		if !ok {
			return false
		}
	}
	return id != ""
}

// fellBackReclaiming words the report of a return whose predecessor's
// allocation could not be freed: the pod gets an ordinary ADD.
func fellBackReclaiming(outcome *wire.ReturnOutcome, err error) {
	outcome.Outcome, outcome.Reason = wire.FellBack, reasonReclaimFailed
	outcome.Why = fmt.Sprintf("the address is still allocated to the member's predecessor on a lost node, and freeing it failed: %v", err)
}
