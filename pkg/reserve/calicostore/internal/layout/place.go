package layout

import (
	"fmt"
	"slices"

	"github.com/capo-net/capo/pkg/reserve"
)

// Bucket is one bucket as read: its head (nil if it does not exist) and
// the overflow objects the head lists that exist, ascending.
type Bucket struct {
	N        int
	Head     *Contents
	Overflow []*Contents
}

// objects are the bucket's objects, head first.
func (b *Bucket) objects() []*Contents {
	var out []*Contents
	if b.Head != nil {
		out = append(out, b.Head)
	}
	return append(out, b.Overflow...)
}

// Write is one object to write: created, or updated at the version read.
type Write struct {
	*Contents
	Create bool
	Adds   []string // addresses this write adds
}

// Placement is how a node's entries go into its bucket.
type Placement struct {
	// Writes, in order: the head first, so an overflow object is listed
	// in its head before it is created.
	Writes []Write
	Added  []string // addresses the writes add
	Held   []string // addresses the bucket already held
	// Refused are addresses not held whose teardown was released by hand
	// (a mark says so): not reserved again.
	Refused []string
}

// Place puts each entry not yet held into the first writable object with
// room, the head first, and makes new objects when all are full: first the
// ones the head lists but that do not exist, then new numbers, listed in
// the head. With refresh (the migration), an entry already held takes the
// older metadata and first timestamp of the two. A later teardown of the
// same pod from another sandbox replaces the entry held (see renews). An
// entry not held whose teardown an operator released is refused, but in
// the migration (which moves what is held).
func (b *Bucket) Place(node string, entries []reserve.Entry, l reserve.Limits, refresh bool) (*Placement, error) {
	pl := &placer{b: b, l: l, refresh: refresh, p: &Placement{}, dirty: map[*Contents]bool{}, created: map[*Contents]bool{}, adds: map[*Contents][]string{}}
	for _, e := range entries {
		addr, err := reserve.NormalizeAddr(e.IP)
		if err != nil {
			return nil, fmt.Errorf("reserving for node %s: %w", node, err)
		}
		e.IP, e.Node = addr, node
		e.ReservedAt, e.Seen = toSecond(e.ReservedAt), toSecond(e.Seen)
		if err := pl.place(e); err != nil {
			return nil, err
		}
	}
	for _, c := range b.objects() {
		if pl.dirty[c] {
			pl.p.Writes = append(pl.p.Writes, Write{Contents: c, Create: pl.created[c], Adds: pl.adds[c]})
		}
	}
	return pl.p, nil
}

// placer is one Place in progress: what it changed so far.
type placer struct {
	b       *Bucket
	l       reserve.Limits
	refresh bool
	p       *Placement
	dirty   map[*Contents]bool
	created map[*Contents]bool
	adds    map[*Contents][]string
}

func (pl *placer) place(e reserve.Entry) error {
	if holder := pl.b.holder(e.IP); holder != nil {
		held := holder.Entries[e.IP]
		switch m := merge(held, e); {
		case holder.Writable() && renews(held, e):
			holder.add(e)
			pl.dirty[holder] = true
		case pl.refresh && holder.Writable() && !same(m, held):
			holder.add(m)
			pl.dirty[holder] = true
		}
		if !slices.Contains(pl.p.Held, e.IP) {
			pl.p.Held = append(pl.p.Held, e.IP)
		}
		return nil
	}
	if !pl.refresh && pl.b.releasedByHand(e) {
		pl.p.Refused = append(pl.p.Refused, e.IP)
		return nil
	}
	target := pl.b.roomFor(e, pl.l)
	if target == nil {
		if target = pl.b.grow(); target == nil {
			return fmt.Errorf("bucket %s has %d overflow objects, all full: release reservations or raise the limits", BucketName(pl.b.N, 0), MaxOverflow)
		}
		pl.created[target] = true
		if target.Index > 0 && pl.b.Head.Relist(target.Index) {
			pl.dirty[pl.b.Head] = true
		}
	}
	target.add(e)
	pl.dirty[target] = true
	pl.adds[target] = append(pl.adds[target], e.IP)
	pl.p.Added = append(pl.p.Added, e.IP)
	return nil
}

// holder is the object holding addr, if any. An unreadable object's
// addresses count: Calico enforces them whatever their metadata.
func (b *Bucket) holder(addr string) *Contents {
	for _, c := range b.objects() {
		if _, ok := c.Entries[addr]; ok {
			return c
		}
	}
	return nil
}

func (b *Bucket) roomFor(e reserve.Entry, l reserve.Limits) *Contents {
	for _, c := range b.objects() {
		if c.Writable() && c.fits(e, l) {
			return c
		}
	}
	return nil
}

// grow adds an empty object to the bucket: the head if there is none,
// else the first overflow number the head lists that does not exist, else
// the first number it does not list.
func (b *Bucket) grow() *Contents {
	if b.Head == nil {
		b.Head = NewBucketObject(b.N, 0)
		return b.Head
	}
	exists := map[int]bool{}
	for _, c := range b.Overflow {
		exists[c.Index] = true
	}
	i := 1
	for _, listed := range b.Head.Overflow {
		if !exists[listed] {
			i = listed
			break
		}
		if listed == i {
			i++
		}
	}
	if i > MaxOverflow {
		return nil
	}
	c := NewBucketObject(b.N, i)
	b.Overflow = append(b.Overflow, c)
	slices.SortFunc(b.Overflow, func(x, y *Contents) int { return x.Index - y.Index })
	return c
}

// Then merges a later placement into the same bucket after p: an object
// written by both is written once, with what both add, in bucket order.
func (p *Placement) Then(q *Placement) *Placement {
	out := &Placement{Added: append(p.Added, q.Added...), Held: append(p.Held, q.Held...), Refused: append(p.Refused, q.Refused...)}
	at := map[*Contents]int{}
	for _, w := range append(slices.Clone(p.Writes), q.Writes...) {
		if i, ok := at[w.Contents]; ok {
			out.Writes[i].Create = out.Writes[i].Create || w.Create
			out.Writes[i].Adds = append(out.Writes[i].Adds, w.Adds...)
			continue
		}
		at[w.Contents] = len(out.Writes)
		out.Writes = append(out.Writes, w)
	}
	slices.SortStableFunc(out.Writes, func(a, b Write) int { return a.Index - b.Index })
	return out
}
