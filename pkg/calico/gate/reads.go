package gate

import (
	"context"
	"errors"
	"time"

	cipam "github.com/projectcalico/calico/libcalico-go/lib/ipam"
	cnet "github.com/projectcalico/calico/libcalico-go/lib/net"

	"github.com/capo-net/capo/pkg/calico/ipam"
	"github.com/capo-net/capo/pkg/reserve"
)

// Store is s behind the gate: every call fails with the gate's error
// while it is closed, so no caller reads an empty view as the truth. A
// Reserve of nothing (the agent's round trip through its batcher) writes
// nothing and passes.
func (g *Gate) Store(s reserve.Store) reserve.Store { return gatedStore{s, g} }

type gatedStore struct {
	reserve.Store
	g *Gate
}

var _ reserve.Store = gatedStore{}

func (s gatedStore) Reserve(ctx context.Context, node string, e []reserve.Entry) (*reserve.Result, error) {
	if err := s.g.Err(); err != nil && len(e) > 0 {
		return nil, err
	}
	return s.Store.Reserve(ctx, node, e)
}

func (s gatedStore) Release(ctx context.Context, refs []reserve.Ref) ([]reserve.Ref, error) {
	if err := s.g.Err(); err != nil {
		return nil, err
	}
	return s.Store.Release(ctx, refs)
}

func (s gatedStore) ReleaseByHand(ctx context.Context, refs []reserve.Ref, at time.Time) ([]reserve.Ref, error) {
	if err := s.g.Err(); err != nil {
		return nil, err
	}
	return s.Store.ReleaseByHand(ctx, refs, at)
}

func (s gatedStore) List(ctx context.Context) (*reserve.Listing, error) {
	if err := s.g.Err(); err != nil {
		return nil, err
	}
	return s.Store.List(ctx)
}

func (s gatedStore) ListNode(ctx context.Context, node string) ([]reserve.Entry, error) {
	if err := s.g.Err(); err != nil {
		return nil, err
	}
	return s.Store.ListNode(ctx, node)
}

func (s gatedStore) Stamp(ctx context.Context, refs []reserve.Ref, seen time.Time) error {
	if err := s.g.Err(); err != nil {
		return err
	}
	return s.Store.Stamp(ctx, refs, seen)
}

func (s gatedStore) Reown(ctx context.Context, refs []reserve.Ref, uid string) error {
	if err := s.g.Err(); err != nil {
		return err
	}
	return s.Store.Reown(ctx, refs, uid)
}

func (s gatedStore) Tidy(ctx context.Context) (*reserve.Tidied, error) {
	if err := s.g.Err(); err != nil {
		return nil, err
	}
	return s.Store.Tidy(ctx)
}

// IPAM is r behind the gate: while it is closed, "this handle has no
// addresses" or "nobody holds this address" is an error, never an answer
// that lets an address be released unreserved. The handle and utilization
// reads pass to r when it has them.
func (g *Gate) IPAM(r ipam.Reader) ipam.HandleReader { return gatedIPAM{r, g} }

type gatedIPAM struct {
	r ipam.Reader
	g *Gate
}

func (r gatedIPAM) GetAssignmentAttributes(ctx context.Context, addr cnet.IP) (map[string]string, *string, error) {
	if err := r.g.Err(); err != nil {
		return nil, nil, err
	}
	return r.r.GetAssignmentAttributes(ctx, addr)
}

func (r gatedIPAM) IPsByHandle(ctx context.Context, handleID string) ([]cnet.IP, error) {
	h, ok := r.r.(ipam.HandleReader)
	if !ok {
		return nil, errors.New("this IPAM reader cannot read a handle's addresses")
	}
	if err := r.g.Err(); err != nil {
		return nil, err
	}
	return h.IPsByHandle(ctx, handleID)
}

// GetUtilization passes the capacity read through the gate when r has it.
func (r gatedIPAM) GetUtilization(ctx context.Context, args cipam.GetUtilizationArgs) ([]*cipam.PoolUtilization, error) {
	u, ok := r.r.(interface {
		GetUtilization(context.Context, cipam.GetUtilizationArgs) ([]*cipam.PoolUtilization, error)
	})
	if !ok {
		return nil, errors.New("this IPAM reader cannot read pool utilization")
	}
	if err := r.g.Err(); err != nil {
		return nil, err
	}
	return u.GetUtilization(ctx, args)
}
