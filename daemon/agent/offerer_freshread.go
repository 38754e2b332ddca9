package agent

import (
	"context"
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/capo-net/capo/pkg/config"
	"github.com/capo-net/capo/pkg/reserve"
	"github.com/capo-net/capo/pkg/returns"
	"github.com/capo-net/capo/pkg/returns/calicoview"
)

// freshRead is what an offer is decided on, all read during the ADD: the
// reservations (lookup) and Calico's view of the addresses held.
type freshRead struct {
	held, all []reserve.Entry
	listErr   error // reading the reservations failed
	view      *calicoview.View
	viewErr   error
}

// read reads the reservations and Calico's view of the held addresses
// together: the view is read for the addresses the index expects held for
// pod while the reservations are read, and read again only if the fresh
// reservations hold others. Both reads stay fresh; an ADD waits for the
// slower of the two instead of their sum (on the Kubernetes datastore a
// consistent List of the reservation objects alone takes tens of
// milliseconds under write load, as the API server's cache catches up).
func (o *offerer) read(ctx context.Context, mode config.ReturnMode, pod *corev1.Pod) freshRead {
	expected := returns.Held(o.held.entries(), pod)
	type viewRead struct {
		v   *calicoview.View
		err error
	}
	early := make(chan viewRead, 1)
	if len(expected) > 0 {
		go func() {
			v, err := o.readView(ctx, expected)
			early <- viewRead{v, err}
		}()
	} else {
		close(early)
	}
	var f freshRead
	f.held, f.all, f.listErr = o.lookup(ctx, mode, pod)
	got, read := <-early
	if f.listErr != nil || len(f.held) == 0 {
		return f
	}
	if read && covers(expected, f.held) {
		f.view, f.viewErr = got.v, got.err
		return f
	}
	f.view, f.viewErr = o.readView(ctx, f.held)
	return f
}

// readView reads Calico's view of entries from this node.
func (o *offerer) readView(ctx context.Context, entries []reserve.Entry) (*calicoview.View, error) {
	if o.views != nil {
		return o.views(ctx, entries)
	}
	return o.viewer.Read(ctx, entries)
}

// covers reports whether a view read for expected tells about every one of
// held: the same address, on the same node (a view reads the routing
// settings only for an address of another node).
func covers(expected, held []reserve.Entry) bool {
	for _, h := range held {
		if !slices.ContainsFunc(expected, func(e reserve.Entry) bool { return e.IP == h.IP && e.Node == h.Node }) {
			return false
		}
	}
	return true
}
