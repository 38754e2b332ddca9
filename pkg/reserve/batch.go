package reserve

import (
	"context"
	"slices"
	"time"
)

// Batcher funnels concurrent reservations for one node into one write:
// a hundred pods torn down at once become one compare-and-swap instead of a
// hundred writers conflicting on the node's object.
type Batcher struct {
	store   Store
	node    string
	timeout func() time.Duration
	in      chan *pending
}

type pending struct {
	entries []Entry
	done    chan batchResult
}

type batchResult struct {
	res *Result
	err error
}

// NewBatcher writes through store for node, each batch under timeout.
func NewBatcher(store Store, node string, timeout func() time.Duration) *Batcher {
	return &Batcher{store: store, node: node, timeout: timeout, in: make(chan *pending, 1024)}
}

// Run writes batches until ctx ends.
func (b *Batcher) Run(ctx context.Context) {
	for {
		var batch []*pending
		select {
		case <-ctx.Done():
			return
		case p := <-b.in:
			batch = append(batch, p)
		}
		// Take whatever else is already waiting; no added delay.
		for more := true; more; {
			select {
			case p := <-b.in:
				batch = append(batch, p)
			default:
				more = false
			}
		}
		b.flush(ctx, batch)
	}
}

func (b *Batcher) flush(ctx context.Context, batch []*pending) {
	var all []Entry
	batch = slices.DeleteFunc(batch, func(p *pending) bool {
		for _, e := range p.entries {
			if _, err := NormalizeAddr(e.IP); err != nil {
				p.done <- batchResult{err: err} // one bad request fails alone
				return true
			}
		}
		all = append(all, p.entries...)
		return false
	})
	if len(batch) == 0 {
		return
	}
	wctx, cancel := context.WithTimeout(ctx, b.timeout())
	res, err := b.store.Reserve(wctx, b.node, all)
	cancel()
	for _, p := range batch {
		if err != nil {
			p.done <- batchResult{err: err}
			continue
		}
		mine := &Result{}
		for _, e := range p.entries {
			// The store answers in canonical form; callers get theirs back.
			addr, _ := NormalizeAddr(e.IP)
			switch {
			case slices.Contains(res.Added, addr):
				mine.Added = append(mine.Added, e.IP)
			case slices.Contains(res.Refused, addr):
				mine.Refused = append(mine.Refused, e.IP)
			default:
				mine.AlreadyHeld = append(mine.AlreadyHeld, e.IP)
			}
		}
		p.done <- batchResult{res: mine}
	}
}

// Reserve queues entries and waits for the batch they join.
func (b *Batcher) Reserve(ctx context.Context, entries []Entry) (*Result, error) {
	p := &pending{entries: entries, done: make(chan batchResult, 1)}
	select {
	case b.in <- p:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	select {
	case r := <-p.done:
		return r.res, r.err
	case <-ctx.Done():
		// The batch may still land; a replay finds it held.
		return nil, ctx.Err()
	}
}
