package capoctl

import (
	"context"
	"fmt"

	"github.com/projectcalico/calico/libcalico-go/lib/clientv3"
	"github.com/projectcalico/calico/libcalico-go/lib/options"
	"k8s.io/client-go/discovery"

	"github.com/capo-net/capo/pkg/calico/apigroup"
)

// calicoInfo is what status, version and bundle read of Calico itself.
type calicoInfo interface {
	// Version is the cluster's Calico version, as calico-node wrote it in
	// ClusterInformation, and whether Calico says its datastore is ready.
	Version(ctx context.Context) (version string, ready bool, err error)
	// Objects are Calico's objects a support bundle carries, by file name.
	Objects(ctx context.Context) (map[string]any, map[string]error)
}

type calicoClient struct{ c clientv3.Interface }

func (c calicoClient) Version(ctx context.Context) (string, bool, error) {
	ci, err := c.c.ClusterInformation().Get(ctx, "default", options.GetOptions{})
	if err != nil {
		return "", false, fmt.Errorf("reading Calico's ClusterInformation: %w", err)
	}
	return ci.Spec.CalicoVersion, ci.Spec.DatastoreReady != nil && *ci.Spec.DatastoreReady, nil
}

func (c calicoClient) Objects(ctx context.Context) (map[string]any, map[string]error) {
	objs, errs := map[string]any{}, map[string]error{}
	add := func(name string, v any, err error) {
		if err != nil {
			errs[name] = err
			return
		}
		objs[name] = v
	}
	ci, err := c.c.ClusterInformation().Get(ctx, "default", options.GetOptions{})
	add("clusterinformation.yaml", ci, err)
	pools, err := c.c.IPPools().List(ctx, options.ListOptions{})
	add("ippools.yaml", pools, err)
	res, err := c.c.IPReservations().List(ctx, options.ListOptions{})
	add("ipreservations.yaml", res, err)
	ipamCfg, err := c.c.IPAM().GetIPAMConfig(ctx)
	add("ipamconfig.yaml", ipamCfg, err)
	return objs, errs
}

// CalicoAPIMode names the API group Calico keeps its resources in, decided
// as every capo component decides it (pkg/calico/apigroup), or the etcd
// datastore; with what is wrong in it, where capo cannot work there.
var CalicoAPIMode = func(ctx context.Context, d discovery.DiscoveryInterface) string {
	m, err := apigroup.Verify(ctx, d, etcdMode(), "")
	if err != nil {
		return fmt.Sprintf("%s (%v)", m, err)
	}
	return m.String()
}

// unreadable names capo's reservation objects that do not read, each a
// problem: their addresses stay reserved and nothing capo does ends them.
func (c *cli) unreadable(r *report) []string {
	if c.store == nil {
		return nil
	}
	l, err := c.store.List(c.ctx)
	if err != nil {
		r.Problems = append(r.Problems, "listing capo's reservations: "+err.Error())
		return nil
	}
	var names []string
	for _, u := range l.Unreadable {
		names = append(names, u.Object)
		r.Problems = append(r.Problems, fmt.Sprintf("IPReservation %s does not read (%v): its %d addresses stay reserved and capo never releases them; fix or delete it", u.Object, u.Err, u.Addresses))
	}
	return names
}
