package layout

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/capo-net/capo/pkg/reserve"
)

// Object is a capo IPReservation without Calico's types, so the encoding
// is tested without them: calicostore converts.
type Object struct {
	Name        string
	Labels      map[string]string
	Annotations map[string]string
	CIDRs       []string
}

// Contents is one capo object, decoded.
type Contents struct {
	Name    string
	Bucket  int                      // the bucket; -1 for an object of the per-node layout
	Index   int                      // 0 for a head; n for a bucket's overflow object n
	Node    string                   // per-node objects: the node of every entry
	Entries map[string]reserve.Entry // by address
	// Overflow lists a head's overflow objects, ascending.
	Overflow []int
	// Retired: the object is being deleted; nothing may be written to it.
	Retired bool
	// Released are the teardowns released by hand from a bucket object,
	// by address (released.go).
	Released map[string]reserve.Entry
	// Err says why the object cannot be read. Its entries are its CIDRs,
	// without metadata, so they count as held; it is never rewritten but
	// for a head's overflow list.
	Err  error
	raw  Object
	size int // bytes of the records as text, for Limits
}

// Legacy reports whether the object is in the per-node layout.
func (c *Contents) Legacy() bool { return c.Bucket < 0 }

// Writable reports whether entries may be added to or removed from it.
func (c *Contents) Writable() bool { return c.Err == nil && !c.Retired }

// NewBucketObject is an empty, not yet created object of a bucket.
func NewBucketObject(bucket, i int) *Contents {
	return &Contents{Name: BucketName(bucket, i), Bucket: bucket, Index: i, Entries: map[string]reserve.Entry{}, size: len(textV2)}
}

// Decode reads an object. The CIDR list is what Calico enforces, so it
// wins: an address without a record (added by hand) is kept without
// metadata, a record without an address is dropped.
func Decode(o Object) *Contents {
	c := &Contents{Name: o.Name, Bucket: -1, Entries: map[string]reserve.Entry{}, raw: o}
	if b, i, ok := ParseBucketName(o.Name); ok {
		c.Bucket, c.Index = b, i
		if i == 0 {
			c.Overflow = parseOverflow(o.Annotations[OverflowAnnotation])
		}
	} else if c.Node = o.Annotations[LegacyNodeKey]; c.Node == "" {
		c.Err = fmt.Errorf("neither a bucket object nor annotated with its node (%s)", LegacyNodeKey)
	} else if n, ok := strings.CutPrefix(o.Name, LegacyName(c.Node, 0)+"-s"); ok {
		c.Index, _ = strconv.Atoi(n)
	}
	for _, cidr := range o.CIDRs {
		addr, err := reserve.NormalizeAddr(cidr)
		if err != nil {
			c.Err = errors.Join(c.Err, err)
			continue
		}
		c.Entries[addr] = reserve.Entry{IP: addr, Node: c.Node}
	}
	records, retired, err := parseRecords(o.Annotations[MetadataAnnotation])
	c.Retired, c.Err = retired, errors.Join(c.Err, err)
	if c.Err == nil {
		c.attach(records)
	}
	if !c.Retired {
		c.decodeReleased(o.Annotations[ReleasedAnnotation])
	}
	return c
}

// attach gives the object's addresses their records.
func (c *Contents) attach(records []reserve.Entry) {
	for _, r := range records {
		addr, err := reserve.NormalizeAddr(r.IP)
		if _, held := c.Entries[addr]; err != nil || !held {
			continue
		}
		r.IP = addr
		if c.Legacy() {
			r.Node = c.Node
		}
		c.Entries[addr] = r
	}
	c.size = len(textV2)
	for _, e := range c.Entries {
		c.size += len(recordSep) + len(record(e))
	}
}

// fits reports whether e can join the object within the limits.
func (c *Contents) fits(e reserve.Entry, l reserve.Limits) bool {
	return len(c.Entries) < l.MaxIPs && c.size+len(recordSep)+len(record(e)) <= l.MaxAnnotationBytes
}

func (c *Contents) add(e reserve.Entry) {
	if old, ok := c.Entries[e.IP]; ok {
		c.size -= len(recordSep) + len(record(old))
	}
	c.Entries[e.IP] = e
	c.size += len(recordSep) + len(record(e))
}

func (c *Contents) remove(addr string) bool {
	e, ok := c.Entries[addr]
	if ok {
		delete(c.Entries, addr)
		c.size -= len(recordSep) + len(record(e))
	}
	return ok
}

// Object renders the contents to write in place of the object as read:
// labels and annotations capo does not own are kept. An unreadable object
// is given back as read, but for a head's overflow list.
func (c *Contents) Object() Object {
	o := Object{Name: c.Name, Labels: maps.Clone(c.raw.Labels), Annotations: maps.Clone(c.raw.Annotations)}
	if o.Labels == nil {
		o.Labels = map[string]string{}
	}
	if o.Annotations == nil {
		o.Annotations = map[string]string{}
	}
	o.Labels[ManagedByLabel] = ManagedBy
	if !c.Legacy() {
		o.Labels[BucketLabel] = fmt.Sprintf("%02d", c.Bucket)
	}
	delete(o.Annotations, OverflowAnnotation)
	if c.Index == 0 && !c.Legacy() && len(c.Overflow) > 0 && !c.Retired {
		o.Annotations[OverflowAnnotation] = formatOverflow(c.Overflow)
	}
	switch {
	case c.Err != nil:
		o.CIDRs = slices.Clone(c.raw.CIDRs)
	case c.Retired:
		o.Annotations[MetadataAnnotation] = retiredMark
		delete(o.Annotations, ReleasedAnnotation)
	default:
		if marks := c.encodeReleased(); marks != "" {
			o.Annotations[ReleasedAnnotation] = marks
		} else if !c.Legacy() {
			delete(o.Annotations, ReleasedAnnotation)
		}
		entries := c.sorted()
		for _, e := range entries {
			o.CIDRs = append(o.CIDRs, reserve.CIDR(e.IP))
		}
		o.Annotations[MetadataAnnotation] = encodeRecords(entries)
		if c.Legacy() {
			// Agents of the per-node layout may still write it: keep
			// their format until the migration retires it.
			o.Annotations[MetadataAnnotation] = encodeV1(entries)
		}
	}
	return o
}

func (c *Contents) sorted() []reserve.Entry {
	out := slices.Collect(maps.Values(c.Entries))
	slices.SortFunc(out, func(a, b reserve.Entry) int { return reserve.CompareAddr(a.IP, b.IP) })
	return out
}

// parseOverflow reads an overflow list leniently: a number that does not
// parse is skipped (the controller's tidy lists what exists again).
func parseOverflow(s string) []int {
	var out []int
	for _, f := range strings.Split(s, ",") {
		if i, err := strconv.Atoi(strings.TrimSpace(f)); err == nil && i >= 1 && i <= MaxOverflow && !slices.Contains(out, i) {
			out = append(out, i)
		}
	}
	slices.Sort(out)
	return out
}

func formatOverflow(idx []int) string {
	parts := make([]string, len(idx))
	for i, n := range idx {
		parts[i] = strconv.Itoa(n)
	}
	return strings.Join(parts, ",")
}
