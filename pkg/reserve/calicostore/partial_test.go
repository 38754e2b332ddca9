package calicostore_test

import (
	"context"
	"errors"
	"testing"

	apiv3 "github.com/projectcalico/api/pkg/apis/projectcalico/v3"
	"github.com/projectcalico/calico/libcalico-go/lib/options"

	"github.com/capo-net/capo/pkg/reserve"
	"github.com/capo-net/capo/pkg/reserve/calicostore"
	"github.com/capo-net/capo/pkg/reserve/reservetest"
)

// partial is a List that could not read some objects.
type partial []reserve.Unreadable

func (p partial) Error() string                 { return "some objects do not read" }
func (p partial) Skipped() []reserve.Unreadable { return p }

type partialObjects struct {
	*reservetest.Objects
	skipped partial
}

func (o partialObjects) List(c context.Context, opts options.ListOptions) (*apiv3.IPReservationList, error) {
	l, err := o.Objects.List(c, opts)
	if err != nil {
		return nil, err
	}
	return l, o.skipped
}

// Objects a List could not read are skipped, capo's among them reported
// unreadable (an operator's are not capo's to report), and everything else
// is listed: one object never hides the rest.
func TestListCarriesOnPastObjectsThatDoNotRead(t *testing.T) {
	objs := partialObjects{Objects: reservetest.NewObjects(), skipped: partial{
		{Object: "capo.bucket-07", Addresses: 3, Err: errors.New("annotation projectcalico.org/metadata does not decode")},
		{Object: "operators-own", Addresses: 1, Err: errors.New("annotation projectcalico.org/metadata does not decode")},
	}}
	s := calicostore.NewOn(objs, reserve.DefaultLimits)
	mustReserve(t, s, "n1", "10.0.0.1")
	for name, list := range map[string]func(context.Context) (*reserve.Listing, error){"List": s.List, "ListCached": s.ListCached} {
		l, err := list(ctx)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(l.Entries) != 1 || len(l.Unreadable) != 1 || l.Unreadable[0].Object != "capo.bucket-07" || l.Unreadable[0].Addresses != 3 {
			t.Fatalf("%s: entries %v, unreadable %+v", name, ips(l.Entries), l.Unreadable)
		}
	}
}
