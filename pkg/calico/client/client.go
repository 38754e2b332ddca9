// Package client is the Calico client capo reads and writes through:
// libcalico-go's (FromEnvironment), and For the API group in force. On
// etcdv3 and in crd.projectcalico.org/v1 that is libcalico-go's as it is;
// in native projectcalico.org/v3, which libcalico-go v3.31 does not know,
// every Calico CRD capo touches goes through capo's own narrow client
// instead: the IPReservations capo writes (Reservations, behind the same
// calicostore.Objects seam libcalico-go's client fills elsewhere) and
// Calico IPAM's reads (IPAM), on Calico's generated clientset
// (github.com/projectcalico/api) and plain REST.
package client

import (
	"context"
	"errors"
	"fmt"
	"net/netip"

	apiv3 "github.com/projectcalico/api/pkg/apis/projectcalico/v3"
	"github.com/projectcalico/calico/libcalico-go/lib/clientv3"
	cipam "github.com/projectcalico/calico/libcalico-go/lib/ipam"
	cnet "github.com/projectcalico/calico/libcalico-go/lib/net"
	"github.com/projectcalico/calico/libcalico-go/lib/options"
	"github.com/projectcalico/calico/libcalico-go/lib/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/capo-net/capo/pkg/calico/apigroup"
	"github.com/capo-net/capo/pkg/calico/ipam"
)

// v3Client is libcalico-go's client with every Calico CRD capo reads or
// writes taken to projectcalico.org/v3: IPReservations, Calico IPAM's
// reads, IPPools, FelixConfiguration and ClusterInformation. What it keeps
// of libcalico-go's own is what is not a Calico CRD on the Kubernetes
// datastore (Nodes and WorkloadEndpoints are read from Nodes and Pods) and
// IPAM's writes, which only calico-ipam makes. A call capo does not make
// on the redirected types is refused, never sent to crd.projectcalico.org.
type v3Client struct {
	clientv3.Interface
	res  *Reservations
	ipam *IPAM
}

// For is the client capo reads and writes Calico through in mode m: c,
// libcalico-go's, on etcdv3 and in crd.projectcalico.org/v1, with capo's
// own reads of a handle's addresses (onBackend); overlaid with
// projectcalico.org/v3 (a v3Client on the API server cfg gives) in that
// group, which libcalico-go v3.31 does not know.
func For(c clientv3.Interface, m apigroup.Mode, cfg func() (*rest.Config, error)) (clientv3.Interface, error) {
	if m.Source == apigroup.SourceEtcd || m.Group != apigroup.GroupV3 {
		if s := ipam.Backend(c); s != nil {
			return onBackend{Interface: c, reads: ipam.Reads{S: s}}, nil
		}
		return c, nil
	}
	rc, err := cfg()
	if err != nil {
		return nil, err
	}
	return newV3(c, rc)
}

// newV3 overlays c with cfg's API server's projectcalico.org/v3.
func newV3(c clientv3.Interface, cfg *rest.Config) (*v3Client, error) {
	res, err := New(cfg)
	if err != nil {
		return nil, err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("projectcalico.org/v3 reader: %w", err)
	}
	return &v3Client{Interface: c, res: res, ipam: NewIPAM(cs.CoreV1().RESTClient())}, nil
}

// errNotHere is a call capo does not make on a v3 type.
var errNotHere = errors.New("not supported by capo's projectcalico.org/v3 client")

func refused(what string) error { return fmt.Errorf("%s: %w", what, errNotHere) }

func (c *v3Client) IPReservations() clientv3.IPReservationInterface { return reservations{c.res} }

func (c *v3Client) IPAM() cipam.Interface {
	return ipamReads{Interface: c.Interface.IPAM(), v3: c.ipam}
}

var _ ipam.BlockReader = (*v3Client)(nil)

// AssignmentIn reads an allocation in a known block
// (ipam.BlockReader).
func (c *v3Client) AssignmentIn(ctx context.Context, block netip.Prefix, addr netip.Addr) (map[string]string, *string, error) {
	return c.ipam.AssignmentIn(ctx, block, addr)
}

func (c *v3Client) IPPools() clientv3.IPPoolInterface { return pools{c.ipam} }

func (c *v3Client) FelixConfigurations() clientv3.FelixConfigurationInterface {
	return felixConfigs{c.ipam}
}

func (c *v3Client) ClusterInformation() clientv3.ClusterInformationInterface {
	return clusterInfo{c.ipam}
}

type reservations struct{ *Reservations }

func (reservations) Watch(context.Context, options.ListOptions) (watch.Interface, error) {
	return nil, refused("watching IPReservations")
}

// ipamReads is Calico IPAM with capo's reads in v3; its writes stay
// libcalico-go's (calico-ipam's to make, never capo's).
type ipamReads struct {
	cipam.Interface
	v3 *IPAM
}

func (i ipamReads) IPsByHandle(ctx context.Context, handleID string) ([]cnet.IP, error) {
	return i.v3.IPsByHandle(ctx, handleID)
}

func (i ipamReads) GetAssignmentAttributes(ctx context.Context, addr cnet.IP) (map[string]string, *string, error) {
	return i.v3.GetAssignmentAttributes(ctx, addr)
}

func (i ipamReads) GetUtilization(ctx context.Context, args cipam.GetUtilizationArgs) ([]*cipam.PoolUtilization, error) {
	return i.v3.GetUtilization(ctx, args)
}

// GetIPAMConfig reads; unlike libcalico-go's it never creates the default.
func (i ipamReads) GetIPAMConfig(ctx context.Context) (*cipam.IPAMConfig, error) {
	cfg, err := i.v3.settings(ctx)
	if err != nil {
		return nil, err
	}
	return &cipam.IPAMConfig{StrictAffinity: cfg.StrictAffinity, AutoAllocateBlocks: true}, nil
}

type pools struct{ v3 *IPAM }

func (p pools) List(ctx context.Context, _ options.ListOptions) (*apiv3.IPPoolList, error) {
	items, err := p.v3.Pools(ctx)
	if err != nil {
		return nil, err
	}
	return &apiv3.IPPoolList{Items: items}, nil
}

func (p pools) Get(ctx context.Context, name string, _ options.GetOptions) (*apiv3.IPPool, error) {
	var out apiv3.IPPool
	if err := p.v3.get(ctx, apigroup.IPPool, name, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

func (pools) Create(context.Context, *apiv3.IPPool, options.SetOptions) (*apiv3.IPPool, error) {
	return nil, refused("creating an IPPool")
}

func (pools) Update(context.Context, *apiv3.IPPool, options.SetOptions) (*apiv3.IPPool, error) {
	return nil, refused("updating an IPPool")
}

func (pools) Delete(context.Context, string, options.DeleteOptions) (*apiv3.IPPool, error) {
	return nil, refused("deleting an IPPool")
}

func (pools) UnsafeCreate(context.Context, *apiv3.IPPool, options.SetOptions) (*apiv3.IPPool, error) {
	return nil, refused("creating an IPPool")
}

func (pools) UnsafeDelete(context.Context, string, options.DeleteOptions) (*apiv3.IPPool, error) {
	return nil, refused("deleting an IPPool")
}

func (pools) Watch(context.Context, options.ListOptions) (watch.Interface, error) {
	return nil, refused("watching IPPools")
}

var _ clientv3.Interface = (*v3Client)(nil)
