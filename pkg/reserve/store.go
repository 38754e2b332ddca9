package reserve

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Store holds reservations. Reserve and Release are idempotent: reserving a
// held address is success and keeps its first timestamp; releasing a free
// one is a no-op. Addresses are compared as values (NormalizeAddr).
type Store interface {
	// Reserve adds entries for a node, in one write to its bucket when
	// they fit.
	Reserve(ctx context.Context, node string, entries []Entry) (*Result, error)
	// Release ends the reservations refs name wherever they are held, and
	// returns the refs that were: an entry replaced at a ref's place since
	// is left (see Ref). It touches only reservations: an address still
	// allocated in Calico IPAM stays allocated. An error that is a
	// *MaybeWritten names refs whose write may have landed all the same.
	Release(ctx context.Context, refs []Ref) ([]Ref, error)
	// ReleaseByHand is Release for an operator (capoctl release, a
	// request by hand): the teardowns it ends stay released. A later
	// Reserve of the same address for the same teardown (its sandbox, else
	// its pod UID) on that node, at a coverage or a journal's replay, is
	// refused for ReleasedByHandKept after at.
	ReleaseByHand(ctx context.Context, refs []Ref, at time.Time) ([]Ref, error)
	// List returns every reservation, and the capo objects it skipped
	// because they do not decode.
	List(ctx context.Context) (*Listing, error)
	// ListNode returns one node's reservations.
	ListNode(ctx context.Context, node string) ([]Entry, error)
	// Stamp sets Seen on the entries that have none.
	Stamp(ctx context.Context, refs []Ref, seen time.Time) error
	// Reown sets the owner UID of the StatefulSet entries refs name: their
	// StatefulSet was re-created under its name and keeps its members'
	// addresses. Their Refs stay the same.
	Reown(ctx context.Context, refs []Ref, ownerUID string) error
	// Tidy moves the entries of the per-node layout into buckets and
	// deletes what is left empty or half-deleted, from what the last List
	// saw: the controller's leader runs it after each pass.
	Tidy(ctx context.Context) (*Tidied, error)
}

// Result says which addresses a Reserve added, which were already held,
// and which it refused: released by hand for that very teardown.
type Result struct {
	Added, AlreadyHeld, Refused []string
}

// ReleasedByHandKept is how long a release by hand stays in force for its
// teardown: past a journal replayed after a long absence of the node's
// agent, or a pod left terminating on a lost node for a day.
const ReleasedByHandKept = 24 * time.Hour

// SameTeardown reports whether a and b are reservations of one address for
// one teardown: the same node and, by the sandbox when both know it, else
// by the pod UID. Nothing known is no.
func SameTeardown(a, b Entry) bool {
	if a.Node != b.Node || a.IP != b.IP {
		return false
	}
	if a.Sandbox != "" && b.Sandbox != "" {
		return a.Sandbox == b.Sandbox
	}
	return a.PodUID != "" && a.PodUID == b.PodUID
}

// MaybeWritten is a write of Release or ReleaseByHand whose outcome is not
// known: it was sent, and no answer came (its context ended, its
// connection dropped) or the datastore failed in its midst. Refs are what
// it was to end; they may be released or still held, as the next List
// tells.
type MaybeWritten struct {
	Refs []Ref
	Err  error
}

func (e *MaybeWritten) Error() string {
	return fmt.Sprintf("the write ending %d reservations may have landed: %v", len(e.Refs), e.Err)
}

func (e *MaybeWritten) Unwrap() error { return e.Err }

// Listing is what List read.
type Listing struct {
	Entries    []Entry      // by address, then node
	Unreadable []Unreadable // skipped: their addresses stay reserved, untouched
	Legacy     int          // objects of the per-node layout, left to migrate
}

// Unreadable is a capo object List skipped.
type Unreadable struct {
	Object    string
	Addresses int // what Calico keeps reserved through it
	Err       error
}

// Tidied says what a Tidy did.
type Tidied struct {
	Migrated int // entries moved out of the per-node layout
	Deleted  int // objects deleted: empty, migrated, or left retired
	Relisted int // overflow objects listed in their head again
}

// SortEntries orders entries by address, then node.
func SortEntries(es []Entry) {
	slices.SortFunc(es, func(a, b Entry) int {
		if c := CompareAddr(a.IP, b.IP); c != 0 {
			return c
		}
		return strings.Compare(a.Node, b.Node)
	})
}
