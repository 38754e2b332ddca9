package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"

	cerrors "github.com/projectcalico/calico/libcalico-go/lib/errors"

	"github.com/capo-net/capo/pkg/calico/apigroup"
	"github.com/capo-net/capo/pkg/calico/ipam"
	"github.com/capo-net/capo/pkg/wire"
)

// A request on the socket is untrusted bytes: any uid-0 process with the
// host's /run can send one. Who a teardown belongs to comes from the host's
// CNI state alone: capo-ipam's ADD record of the sandbox, or, without one,
// the allocation calico-ipam made for it on this node. The request's pod is
// only compared with it. A request that names no pod claims none: it is
// capo-ipam's own, for an IPAM call whose CNI_ARGS carry no K8S_POD_NAME (a
// direct caller, a runtime other than the kubelet's), and it is decided
// for the pod the host names, if any.

// refusal is a request whose pod is not the sandbox's: answered 403, never
// decided, and counted by why (a bounded word).
type refusal struct{ why, msg string }

func (r *refusal) Error() string { return r.msg }

// Reasons for a refusal, the label of capo_agent_socket_refused_total.
const (
	refusedRecord  = "record-differs"  // the ADD record names another pod
	refusedHandle  = "handle-differs"  // Calico's allocation names another pod
	refusedNode    = "other-node"      // the handle is allocated on another node
	refusedUnknown = "no-pod-recorded" // the request names a pod, Calico's allocation none
)

// identify replaces what a request says about its sandbox with what the
// host says: the pod, the addresses and the decision at ADD from the
// record, else the pod and addresses from Calico's allocation on this
// node. It returns a *refusal when the request names another pod, and
// sets req.RecordedIPs to every address the decision may reserve (none:
// the handle holds none).
func (sv *server) identify(ctx context.Context, req *wire.ReserveRequest) error {
	req.RecordedIPs, req.AtAdd = nil, nil
	if sv.records != nil {
		if rec := sv.records(req.Network, req.ContainerID, req.IfName); rec != nil && rec.Pod.Name != "" {
			if !claimsNoPod(req.Pod) && !samePod(rec.Pod, req.Pod) {
				return sv.refuse(refusedRecord, req, rec.Pod, "capo-ipam's ADD record of sandbox %s names pod %s", req.ContainerID, podName(rec.Pod))
			}
			req.Pod, req.RecordedIPs, req.AtAdd = rec.Pod, rec.IPs, rec.AtAdd
			if len(rec.IPs) > 0 {
				return nil
			}
		}
	}
	return sv.fromHandle(ctx, req)
}

// fromHandle reads Calico's allocation for the sandbox: only one made on
// this node, and the pod calico-ipam recorded for it is the identity.
func (sv *server) fromHandle(ctx context.Context, req *wire.ReserveRequest) error {
	got, err := sv.ipam.IPsByHandle(ctx, req.Handle())
	if errors.As(err, new(cerrors.ErrorResourceDoesNotExist)) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading Calico handle %s: %w", req.Handle(), err)
	}
	for _, ip := range got {
		addr, ok := netip.AddrFromSlice(ip.IP)
		if !ok {
			continue
		}
		h, err := ipam.Who(ctx, sv.ipam, addr.Unmap())
		if err != nil {
			return err
		}
		switch {
		case h == nil || h.Handle != req.Handle():
			continue // released since: nothing of it to reserve
		case claimsNoPod(req.Pod) && (h.Pod == "" || h.Namespace == ""):
			// No pod's, asked for by none (calico-ipam run alone, an
			// address assigned by hand): never selected, wherever it is.
		case h.Node != sv.node:
			return sv.refuse(refusedNode, req, wire.PodRef{Namespace: h.Namespace, Name: h.Pod}, "Calico's handle %s was allocated on node %q, not this node %q", req.Handle(), h.Node, sv.node)
		}
		if err := sv.sameAsAllocation(req, h.Namespace, h.Pod, addr); err != nil {
			return err
		}
		req.RecordedIPs = append(req.RecordedIPs, addr.Unmap().String())
	}
	return nil
}

// sameAsAllocation compares the request's pod with the one Calico's
// allocation of addr names. A request that names no pod takes the
// allocation's (none too, for an IPAM call with no pod); one that names a
// pod the allocation does not is refused.
func (sv *server) sameAsAllocation(req *wire.ReserveRequest, namespace, pod string, addr netip.Addr) error {
	host := wire.PodRef{Namespace: namespace, Name: pod}
	switch {
	case claimsNoPod(req.Pod) && (pod == "" || namespace == ""):
		req.Pod = wire.PodRef{}
	case claimsNoPod(req.Pod):
		req.Pod = host
	case pod == "" || namespace == "":
		return sv.refuse(refusedUnknown, req, wire.PodRef{}, "Calico's allocation of %s names no pod", addr)
	case !samePod(host, req.Pod):
		return sv.refuse(refusedHandle, req, host, "Calico's allocation of handle %s names pod %s/%s", req.Handle(), namespace, pod)
	}
	return nil
}

// claimsNoPod: the request names no pod (its CNI_ARGS had no K8S_POD_NAME).
func claimsNoPod(p wire.PodRef) bool { return p.Name == "" }

// samePod: same namespace and name, and the same UID when both say one.
func samePod(host, asked wire.PodRef) bool {
	if host.Namespace != asked.Namespace || host.Name != asked.Name {
		return false
	}
	return host.UID == "" || asked.UID == "" || host.UID == asked.UID
}

func (sv *server) refuse(why string, req *wire.ReserveRequest, host wire.PodRef, format string, args ...any) error {
	sv.metrics.refused.WithLabelValues(why).Inc()
	msg := fmt.Sprintf("refused: the request names pod %s, but %s: a teardown belongs to the pod the node's CNI state names; nothing reserved",
		podName(req.Pod), fmt.Sprintf(format, args...))
	if why == refusedRecord {
		msg += " (if capo-ipam sent this, its ADD record is damaged: remove the record and the DEL reads Calico's handle)"
	}
	slog.Warn("a socket request for another pod's sandbox refused", "why", why, "asked", podName(req.Pod), "host", podName(host), "container", req.ContainerID)
	return &refusal{why: why, msg: msg}
}

func podName(p wire.PodRef) string {
	s := p.Namespace + "/" + p.Name
	if p.UID != "" {
		s += " (uid " + p.UID + ")"
	}
	return s
}

// callGroup refuses a teardown whose capo-ipam call uses another Calico
// API group than this agent: the reservation would be where calico-ipam
// does not read, and capo-ipam would release the address. A call that
// names none is in the group discovery gives, as calico-ipam decides then.
func (sv *server) callGroup(ctx context.Context, group string) error {
	m, ok := apigroup.InForce()
	if !ok || m.Source == apigroup.SourceEtcd {
		return nil
	}
	if group == "" {
		if m.Source == apigroup.SourceDiscovery || sv.discovered == nil {
			return nil // calico-ipam decides by discovery, as this agent did
		}
		g, err := sv.discovered(ctx)
		if err != nil {
			return fmt.Errorf("telling the Calico API group calico-ipam uses on this call (by discovery): %w", err)
		}
		group = g
	}
	if err := apigroup.Agrees(m, group); err != nil {
		return fmt.Errorf("capo-ipam's call uses Calico's API group %s, this agent %s: nothing is reserved where calico-ipam would not read it, and the teardown is journaled with its address kept: %w", group, m, err)
	}
	return nil
}
