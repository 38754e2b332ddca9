package robust

import (
	"context"
	"encoding/json"
	"fmt"
	"math/big"
	"net"
	"time"

	libapiv3 "github.com/projectcalico/calico/libcalico-go/lib/apis/v3"
	bapi "github.com/projectcalico/calico/libcalico-go/lib/backend/api"
	"github.com/projectcalico/calico/libcalico-go/lib/backend/model"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/capo-net/capo/pkg/reserve"
)

// sample is Calico's state at one instant, as near as two reads get:
// which handle holds each address of the pool (read first, T0), then
// capo's reservations (read second, done by T1). Read in that order, a
// teardown in between (reserve, then release) is never seen as neither.
type sample struct {
	T0, T1  time.Time
	Holder  map[string]string // address -> Calico IPAM handle
	Entries []reserve.Entry
}

func (s *sample) reserved(ip string) bool {
	for _, e := range s.Entries {
		if e.IP == ip {
			return true
		}
	}
	return false
}

// take reads a sample; an error (a datastore away) skips it.
func (c *cluster) take(ctx context.Context) (*sample, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	s := &sample{T0: time.Now()}
	var err error
	if s.Holder, err = c.allocations(ctx); err != nil {
		return nil, fmt.Errorf("reading Calico's blocks: %w", err)
	}
	l, err := c.store.List(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading capo's reservations: %w", err)
	}
	s.Entries, s.T1 = l.Entries, time.Now()
	return s, nil
}

// allocations reads which handle holds each address of the shared pool,
// from Calico's allocation blocks themselves.
func (c *cluster) allocations(ctx context.Context) (map[string]string, error) {
	pool := c.nodes[0].env.Pool
	out := map[string]string{}
	add := func(cidr *net.IPNet, allocs []*int, attrs []libapiv3.AllocationAttribute) {
		for ord, idx := range allocs {
			if idx == nil || !pool.Contains(cidr.IP) {
				continue
			}
			h := ""
			if *idx < len(attrs) && attrs[*idx].AttrPrimary != nil {
				h = *attrs[*idx].AttrPrimary
			}
			if h != "" { // no handle: cooling (Calico 3.33+), nobody's
				out[ordinalIP(cidr, ord)] = h
			}
		}
	}
	if c.nodes[0].env.Calico == nil {
		return out, c.v3Blocks(ctx, add)
	}
	be, ok := c.nodes[0].env.Calico.(interface{ Backend() bapi.Client })
	if !ok {
		return nil, fmt.Errorf("the Calico client exposes no backend")
	}
	kvs, err := be.Backend().List(ctx, model.BlockListOptions{}, "")
	if err != nil {
		return nil, err
	}
	for _, kv := range kvs.KVPairs {
		if b, ok := kv.Value.(*model.AllocationBlock); ok {
			attrs := make([]libapiv3.AllocationAttribute, len(b.Attributes))
			for i, a := range b.Attributes {
				attrs[i] = libapiv3.AllocationAttribute{AttrPrimary: a.AttrPrimary}
			}
			add(&b.CIDR.IPNet, b.Allocations, attrs)
		}
	}
	return out, nil
}

// v3Blocks reads the projectcalico.org/v3 IPAMBlocks of a native-v3 bed.
func (c *cluster) v3Blocks(ctx context.Context, add func(*net.IPNet, []*int, []libapiv3.AllocationAttribute)) error {
	dyn, err := dynamic.NewForConfig(c.bed.REST)
	if err != nil {
		return err
	}
	list, err := dyn.Resource(schema.GroupVersionResource{Group: "projectcalico.org", Version: "v3", Resource: "ipamblocks"}).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for _, item := range list.Items {
		raw, err := json.Marshal(item.Object["spec"])
		if err != nil {
			return err
		}
		var spec libapiv3.IPAMBlockSpec
		if err := json.Unmarshal(raw, &spec); err != nil {
			return fmt.Errorf("block %s: %w", item.GetName(), err)
		}
		_, cidr, err := net.ParseCIDR(spec.CIDR)
		if err != nil {
			return fmt.Errorf("block %s: %w", item.GetName(), err)
		}
		add(cidr, spec.Allocations, spec.Attributes)
	}
	return nil
}

// ordinalIP is the address at ordinal ord of a block.
func ordinalIP(cidr *net.IPNet, ord int) string {
	base := new(big.Int).SetBytes(cidr.IP.To16())
	ip := new(big.Int).Add(base, big.NewInt(int64(ord))).Bytes()
	full := make(net.IP, net.IPv6len)
	copy(full[net.IPv6len-len(ip):], ip)
	return full.String()
}
