package calicoview

import (
	"context"
	"errors"
	"net/netip"
	"sync"
	"testing"

	apiv3 "github.com/projectcalico/api/pkg/apis/projectcalico/v3"
	libapiv3 "github.com/projectcalico/calico/libcalico-go/lib/apis/v3"
	"github.com/projectcalico/calico/libcalico-go/lib/clientv3"
	cerrors "github.com/projectcalico/calico/libcalico-go/lib/errors"
	cipam "github.com/projectcalico/calico/libcalico-go/lib/ipam"
	cnet "github.com/projectcalico/calico/libcalico-go/lib/net"
	"github.com/projectcalico/calico/libcalico-go/lib/options"

	"github.com/capo-net/capo/pkg/calico/ipam"
	"github.com/capo-net/capo/pkg/reserve"
)

// fakeCalico is Calico's datastore as a view reads it: pools, and who holds
// each address in each block. Its GetAssignmentAttributes finds the block
// as capo's reader does (ipam.BlockOf: any pool); AssignmentIn reads the block
// given. It counts both.
type fakeCalico struct {
	clientv3.Interface
	mu       sync.Mutex
	pools    []apiv3.IPPool
	pods     map[netip.Prefix]map[netip.Addr]string // block, address: pod
	blockErr error                                  // AssignmentIn fails so
	who, in  int
}

func (c *fakeCalico) Nodes() clientv3.NodeInterface     { return nodes{} }
func (c *fakeCalico) IPPools() clientv3.IPPoolInterface { return pools{c: c} }
func (c *fakeCalico) IPAM() cipam.Interface             { return ipamReads{c: c} }

func (c *fakeCalico) holder(block netip.Prefix, addr netip.Addr) (map[string]string, *string, error) {
	pod, ok := c.pods[block][addr]
	if !ok {
		return nil, nil, cerrors.ErrorResourceDoesNotExist{Identifier: addr.String()}
	}
	h := "k8s-pod-network." + pod
	return map[string]string{cipam.AttributePod: pod, cipam.AttributeNamespace: "ns"}, &h, nil
}

func (c *fakeCalico) AssignmentIn(_ context.Context, block netip.Prefix, addr netip.Addr) (map[string]string, *string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.in++
	if c.blockErr != nil {
		return nil, nil, c.blockErr
	}
	return c.holder(block, addr)
}

type ipamReads struct {
	cipam.Interface
	c *fakeCalico
}

func (r ipamReads) GetAssignmentAttributes(_ context.Context, ip cnet.IP) (map[string]string, *string, error) {
	r.c.mu.Lock()
	defer r.c.mu.Unlock()
	r.c.who++
	addr, _ := netip.AddrFromSlice(ip.IP)
	block, ok := ipam.BlockOf(addr.Unmap(), r.c.pools)
	if !ok {
		return nil, nil, cerrors.ErrorResourceDoesNotExist{Identifier: addr.String()}
	}
	return r.c.holder(block, addr.Unmap())
}

type nodes struct{ clientv3.NodeInterface }

func (nodes) Get(_ context.Context, name string, _ options.GetOptions) (*libapiv3.Node, error) {
	n := libapiv3.NewNode()
	n.Name = name
	return n, nil
}

type pools struct {
	clientv3.IPPoolInterface
	c *fakeCalico
}

func (p pools) List(context.Context, options.ListOptions) (*apiv3.IPPoolList, error) {
	p.c.mu.Lock()
	defer p.c.mu.Unlock()
	return &apiv3.IPPoolList{Items: append([]apiv3.IPPool(nil), p.c.pools...)}, nil
}

func pool(cidr string, blockSize int) apiv3.IPPool {
	var p apiv3.IPPool
	p.Name, p.Spec.CIDR, p.Spec.BlockSize = cidr, cidr, blockSize
	return p
}

// A view reads a held address's block at once, on the pools the last
// view read, and keeps that answer only where this view's pools give the
// same block: a pool re-created with another block size, a pool disabled,
// or a failed early read is read again as Calico reads it.
func TestHolderReadOnTheLastPools(t *testing.T) {
	ctx := context.Background()
	addr := netip.MustParseAddr("10.0.0.37")
	c := &fakeCalico{
		pools: []apiv3.IPPool{pool("10.0.0.0/16", 26)},
		pods: map[netip.Prefix]map[netip.Addr]string{
			netip.MustParsePrefix("10.0.0.0/26"):  {addr: "kafka-1"},
			netip.MustParsePrefix("10.0.0.32/28"): {addr: "redis-0"},
		},
	}
	r := &Reader{Calico: c, Node: "n1"}
	entries := []reserve.Entry{{IP: addr.String(), Node: "n1"}}
	read := func(step string, wantPod string, wantWho, wantIn int) {
		t.Helper()
		c.who, c.in = 0, 0
		v, err := r.Read(ctx, entries)
		if err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		got := ""
		if h := v.holders[addr.String()]; h != nil {
			got = h.Pod
		}
		if got != wantPod || c.who != wantWho || c.in != wantIn {
			t.Fatalf("%s: holder %q after %d reads through the pools and %d of the block; want %q, %d and %d", step, got, c.who, c.in, wantPod, wantWho, wantIn)
		}
	}
	read("first view, no pools known", "kafka-1", 1, 0)
	read("pools unchanged", "kafka-1", 0, 1)

	c.pools = []apiv3.IPPool{pool("10.0.0.0/16", 28)} // deleted, re-created with /28 blocks
	read("pool re-created with another block size", "redis-0", 1, 1)
	read("the new pools are known", "redis-0", 0, 1)

	c.blockErr = errors.New("connection reset")
	read("the early block read fails", "redis-0", 1, 1)
	c.blockErr = nil

	// A disabled pool's blocks keep their allocations: the early read stands.
	c.pools[0].Spec.Disabled = true
	read("pool disabled", "redis-0", 0, 1)
	c.pools = nil
	read("pool deleted: no block", "", 1, 1)
	read("no pool known", "", 1, 0)
}
