package returns

import (
	"fmt"
	"net/netip"
	"time"

	"github.com/capo-net/capo/pkg/calico"
	"github.com/capo-net/capo/pkg/config"
	"github.com/capo-net/capo/pkg/reserve"
)

// Pool is what decides about one address in its IP pool.
type Pool struct {
	Name, CIDR       string
	Disabled         bool
	Workloads        bool // allowedUses includes Workload
	SelectsNode      bool // the pool's nodeSelector matches the node the pod starts on
	SelectsNamespace bool // its namespaceSelector matches the pod's namespace
	VXLAN            bool // vxlanMode Always or CrossSubnet
	DisableBGPExport bool
}

// Facts are what Calico says about one held address, as seen from the node
// the pod starts on.
type Facts struct {
	Node   string         // where the pod starts
	Pool   *Pool          // the enabled or disabled pool containing the address; nil if none
	Holder *calico.Holder // its allocation now; nil if free
	// Requested are the pools the pod's (or its namespace's) Calico pool
	// annotation names for this family, by name or CIDR; nil if none.
	Requested []string
	// For an address of another node's block:
	StrictAffinity bool // IPAMConfiguration strictAffinity
	ClusterRoutes  bool // FelixConfiguration programClusterRoutes Enabled: felix, not BIRD, programs IPIP and unencapsulated routes
	NodeBGP        bool // the node's Calico Node has a BGP spec: BIRD runs there (calico-node clears it in policy-only mode)
	// Cooldown is Calico's IPAMConfiguration ipCooldownSeconds (Calico
	// 3.33+): a released address stays in its block, marked released and
	// pointing at no handle (Holder.Cooling), until it has cooled.
	Cooldown time.Duration
}

// Check says whether calico-ipam can give e's address back to its pod on
// f.Node and Calico will route it there: "" when it can, else the reason
// and a sentence an operator can act on.
func Check(mode config.ReturnMode, e reserve.Entry, f Facts) (Reason, string) {
	switch {
	case f.Holder != nil && (f.Holder.Cooling || e.IsSandbox(f.Holder.Handle) && f.Cooldown > 0):
		return Cooling, fmt.Sprintf("%s is cooling in Calico's IPAM (IPAMConfiguration ipCooldownSeconds %d): calico-ipam assigns it to no one, this pod included, until it has cooled; the reservation stays, and a pod that comes back later than that gets it", e.IP, int(f.Cooldown.Seconds()))
	case f.Holder != nil && e.IsSandbox(f.Holder.Handle):
		return Allocated, fmt.Sprintf("%s is still allocated to the sandbox torn down (%s): Calico has not released it yet", e.IP, f.Holder.Handle)
	case f.Holder != nil && f.Holder.Pod != "":
		return Allocated, fmt.Sprintf("%s is allocated to pod %s/%s", e.IP, f.Holder.Namespace, f.Holder.Pod)
	case f.Holder != nil:
		return Allocated, fmt.Sprintf("%s is allocated (Calico handle %q)", e.IP, f.Holder.Handle)
	case f.Pool == nil:
		return NoPool, fmt.Sprintf("no IP pool contains %s any more", e.IP)
	case f.Pool.Disabled:
		return NoPool, fmt.Sprintf("IP pool %s, which contains %s, is disabled", f.Pool.Name, e.IP)
	case !f.Pool.Workloads:
		return NoPool, fmt.Sprintf("IP pool %s, which contains %s, does not allow workloads", f.Pool.Name, e.IP)
	case !f.Pool.SelectsNode:
		return PoolNotForNode, fmt.Sprintf("IP pool %s, which contains %s, does not select node %s (its nodeSelector)", f.Pool.Name, e.IP, f.Node)
	case !f.Pool.SelectsNamespace:
		return PoolNotForNode, fmt.Sprintf("IP pool %s, which contains %s, does not select the pod's namespace (its namespaceSelector)", f.Pool.Name, e.IP)
	case f.Requested != nil && !requested(f.Requested, f.Pool):
		return PoolNotForNode, fmt.Sprintf("the pod's Calico pool annotation %v does not include pool %s, which contains %s", f.Requested, f.Pool.Name, e.IP)
	case e.Node == f.Node:
		return "", ""
	case mode != config.ReturnAnyNode:
		return OtherNode, fmt.Sprintf("%s is held for node %s and returnAddress is %s", e.IP, e.Node, mode)
	case f.StrictAffinity:
		return StrictAffinity, fmt.Sprintf("%s belongs to a block of node %s and IPAMConfiguration strictAffinity is on: Calico assigns no address from another node's block", e.IP, e.Node)
	}
	return routed(e, f)
}

// routed applies Calico's routing of a borrowed address (an address of
// another node's block; see docs/return-address.md for the sources):
// felix programs a /32 (/128) route for it in a VXLAN pool, and in IPIP
// and unencapsulated pools when it programs cluster routes; otherwise BIRD
// exports the /32 from the node that holds it, unless the pool has
// disableBGPExport or BIRD does not run there.
func routed(e reserve.Entry, f Facts) (Reason, string) {
	switch {
	case f.Pool.VXLAN, f.ClusterRoutes:
		return "", ""
	case f.Pool.DisableBGPExport:
		return NotRouted, fmt.Sprintf("IP pool %s has disableBGPExport and no VXLAN: nothing would route %s, borrowed from node %s's block, to node %s", f.Pool.Name, e.IP, e.Node, f.Node)
	case !f.NodeBGP:
		return NotRouted, fmt.Sprintf("node %s runs no BGP (its Calico Node has no BGP spec) and IP pool %s has no VXLAN: nothing would route %s, borrowed from node %s's block", f.Node, f.Pool.Name, e.IP, e.Node)
	}
	return "", ""
}

// requested reports whether the annotation's list names p, by name or by
// CIDR (compared as prefixes: 10.0.0.0/24 and 10.0.0.00/24 are one).
func requested(names []string, p *Pool) bool {
	pc, pcErr := netip.ParsePrefix(p.CIDR)
	for _, n := range names {
		if n == p.Name || n == p.CIDR {
			return true
		}
		if c, err := netip.ParsePrefix(n); err == nil && pcErr == nil && c.Masked() == pc.Masked() {
			return true
		}
	}
	return false
}
