// Package calicoview reads from Calico's datastore what returns.Check
// decides on: the pools, the node, IPAM's strict affinity, felix's route
// programming and who holds each address. capo-agent reads it on a
// returning pod's ADD, capoctl explain to tell an operator.
package calicoview

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"time"

	apiv3 "github.com/projectcalico/api/pkg/apis/projectcalico/v3"
	libapiv3 "github.com/projectcalico/calico/libcalico-go/lib/apis/v3"
	"github.com/projectcalico/calico/libcalico-go/lib/clientv3"
	cerrors "github.com/projectcalico/calico/libcalico-go/lib/errors"
	cipam "github.com/projectcalico/calico/libcalico-go/lib/ipam"
	"github.com/projectcalico/calico/libcalico-go/lib/options"
	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"

	"github.com/capo-net/capo/pkg/calico"
	"github.com/capo-net/capo/pkg/reserve"
	"github.com/capo-net/capo/pkg/returns"
)

// View is Calico as seen from the node a pod starts on.
type View struct {
	node           *libapiv3.Node
	pools          []apiv3.IPPool
	strictAffinity bool
	clusterRoutes  bool
	holders        map[string]*calico.Holder
	// Cooldown is Calico's IP cooldown (ReadCooldown), set by the reader.
	Cooldown time.Duration
}

// Reader reads views from one node. It keeps the pools the last view
// read, to find a held address's block before this view's pools are read.
type Reader struct {
	Calico clientv3.Interface
	Node   string

	mu    sync.Mutex
	pools []apiv3.IPPool // as the last view read them
}

// Read reads what deciding about entries takes: the pools and the Calico
// Node always; IPAM's and felix's settings only if an entry is of another
// node (a borrowed address); who holds each address. The reads go out
// together: they sit on a pod's ADD.
func (r *Reader) Read(ctx context.Context, entries []reserve.Entry) (*View, error) {
	v := &View{holders: map[string]*calico.Holder{}}
	c := r.Calico
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() (err error) {
		if v.node, err = c.Nodes().Get(gctx, r.Node, options.GetOptions{}); err != nil {
			return fmt.Errorf("reading Calico node %s: %w", r.Node, err)
		}
		return nil
	})
	g.Go(func() error {
		pools, err := c.IPPools().List(gctx, options.ListOptions{})
		if err != nil {
			return fmt.Errorf("listing IP pools: %w", err)
		}
		v.pools = pools.Items
		return nil
	})
	if slices.ContainsFunc(entries, func(e reserve.Entry) bool { return e.Node != r.Node }) {
		g.Go(func() error { return v.readRouting(gctx, c) })
	}
	h := r.startHolders(gctx, g, entries)
	if err := g.Wait(); err != nil {
		return nil, err
	}
	r.remember(v.pools)
	if err := h.finish(ctx, c.IPAM(), v.pools); err != nil {
		return nil, err
	}
	for i, e := range entries {
		v.holders[e.IP] = h.holders[i]
	}
	return v, nil
}

func (v *View) readRouting(ctx context.Context, c clientv3.Interface) error {
	cfg, err := c.IPAM().GetIPAMConfig(ctx)
	if err != nil {
		return fmt.Errorf("reading IPAM's configuration: %w", err)
	}
	v.strictAffinity = cfg.StrictAffinity
	fc, err := c.FelixConfigurations().Get(ctx, "default", options.GetOptions{})
	if err != nil && !errors.As(err, new(cerrors.ErrorResourceDoesNotExist)) {
		return fmt.Errorf("reading FelixConfiguration default: %w", err)
	}
	v.clusterRoutes = fc != nil && fc.Spec.ProgramClusterRoutes != nil && *fc.Spec.ProgramClusterRoutes == "Enabled"
	return nil
}

// Facts are the view's facts about e for a pod of namespace ns, whose
// Calico pool annotations (the pod's, else its namespace's) podAnn and
// nsAnn are.
func (v *View) Facts(e reserve.Entry, ns *corev1.Namespace, podAnn map[string]string) returns.Facts {
	f := returns.Facts{
		Node: v.node.Name, Holder: v.holders[e.IP], StrictAffinity: v.strictAffinity, ClusterRoutes: v.clusterRoutes,
		NodeBGP: v.node.Spec.BGP != nil, Cooldown: v.Cooldown,
	}
	addr, err := netip.ParseAddr(e.IP)
	if err != nil {
		return f
	}
	key := "cni.projectcalico.org/ipv4pools"
	if addr.Is6() {
		key = "cni.projectcalico.org/ipv6pools"
	}
	f.Requested = requested(podAnn[key])
	if f.Requested == nil && ns != nil {
		f.Requested = requested(ns.Annotations[key])
	}
	for _, p := range v.pools {
		if pfx, err := netip.ParsePrefix(p.Spec.CIDR); err == nil && pfx.Contains(addr) {
			f.Pool = v.pool(p, ns)
			break
		}
	}
	return f
}

func (v *View) pool(p apiv3.IPPool, ns *corev1.Namespace) *returns.Pool {
	onNode, err := cipam.SelectsNode(p, *v.node)
	onNode = onNode && err == nil
	forNS, err := cipam.SelectsNamespace(p, ns)
	forNS = forNS && err == nil
	return &returns.Pool{
		Name: p.Name, CIDR: p.Spec.CIDR, Disabled: p.Spec.Disabled,
		Workloads:   len(p.Spec.AllowedUses) == 0 || slices.Contains(p.Spec.AllowedUses, apiv3.IPPoolAllowedUseWorkload),
		SelectsNode: onNode, SelectsNamespace: forNS,
		VXLAN:            p.Spec.VXLANMode == apiv3.VXLANModeAlways || p.Spec.VXLANMode == apiv3.VXLANModeCrossSubnet,
		DisableBGPExport: p.Spec.DisableBGPExport,
	}
}

// requested reads a Calico pool annotation; nil when there is none or it
// does not parse (the ADD itself then fails on it, as under calico-ipam).
func requested(v string) []string {
	if v == "" {
		return nil
	}
	var l []string
	if json.Unmarshal([]byte(v), &l) != nil {
		return nil
	}
	return l
}
