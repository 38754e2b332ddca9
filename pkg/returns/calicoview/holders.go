package calicoview

import (
	"context"
	"net/netip"

	apiv3 "github.com/projectcalico/api/pkg/apis/projectcalico/v3"
	"golang.org/x/sync/errgroup"

	"github.com/capo-net/capo/pkg/calico"
	"github.com/capo-net/capo/pkg/calico/ipam"
	"github.com/capo-net/capo/pkg/reserve"
)

// holderReads are the reads of who holds each held address, started
// beside the view's other reads.
//
// Calico IPAM's GetAssignmentAttributes lists every pool to find an
// address's block, then reads the block: two reads in turn, the slowest
// part of a returning pod's offer. A pool's CIDR and block size cannot
// change while it exists, so the block the last view's pools give is read
// at once, beside this view's own pools; the answer stands only if this
// view's pools give the same block (finish), and is read again otherwise.
// Nothing is decided on the older pools.
type holderReads struct {
	addrs   []netip.Addr   // invalid: the entry's address does not parse
	guessed []netip.Prefix // the block read early; invalid: none
	holders []*calico.Holder
	errs    []error
}

// startHolders starts the reads into g: each address's block read at once
// when the last view's pools give it and c can read a block, else Calico's
// own read.
func (r *Reader) startHolders(ctx context.Context, g *errgroup.Group, entries []reserve.Entry) *holderReads {
	n := len(entries)
	h := &holderReads{addrs: make([]netip.Addr, n), guessed: make([]netip.Prefix, n), holders: make([]*calico.Holder, n), errs: make([]error, n)}
	blocks, last := ipam.BlockReaderOf(r.Calico), r.lastPools()
	for i, e := range entries {
		addr, err := netip.ParseAddr(e.IP)
		if err != nil {
			continue
		}
		h.addrs[i] = addr
		if b, ok := ipam.BlockOf(addr, last); ok && blocks != nil {
			h.guessed[i] = b
			g.Go(func() error {
				// An error here only sends finish to Calico's own read.
				h.holders[i], h.errs[i] = ipam.WhoIn(ctx, blocks, b, addr)
				return nil
			})
			continue
		}
		g.Go(func() (err error) {
			h.holders[i], err = ipam.Who(ctx, r.Calico.IPAM(), addr)
			return err
		})
	}
	return h
}

// finish reads again, with Calico's own read, each address whose early
// block read failed or whose block the fresh pools do not confirm.
func (h *holderReads) finish(ctx context.Context, rd ipam.Reader, pools []apiv3.IPPool) error {
	g, ctx := errgroup.WithContext(ctx)
	for i, b := range h.guessed {
		if !b.IsValid() {
			continue
		}
		if fresh, ok := ipam.BlockOf(h.addrs[i], pools); ok && fresh == b && h.errs[i] == nil {
			continue
		}
		g.Go(func() (err error) {
			h.holders[i], err = ipam.Who(ctx, rd, h.addrs[i])
			return err
		})
	}
	return g.Wait()
}

func (r *Reader) lastPools() []apiv3.IPPool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.pools
}

func (r *Reader) remember(pools []apiv3.IPPool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pools = pools
}
