package capoctl

import (
	"context"
	"fmt"

	"github.com/projectcalico/calico/libcalico-go/lib/clientv3"
	"github.com/projectcalico/calico/libcalico-go/lib/options"
	"k8s.io/client-go/discovery"
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

// CalicoAPIMode names which API serves Calico's types in the cluster
// (projectcalico.org/v3, or crd.projectcalico.org/v1 CRDs), or the etcd
// datastore; "" when it cannot tell. It is a seam: the detection of
// Calico's API group (issue 26) replaces this with its own.
var CalicoAPIMode = func(_ context.Context, d discovery.DiscoveryInterface) string {
	if etcdMode() {
		return "etcdv3 datastore"
	}
	for _, gv := range reservationGroups {
		if list, err := d.ServerResourcesForGroupVersion(gv); err == nil && len(list.APIResources) > 0 {
			return gv
		}
	}
	return ""
}
