package testbed

import (
	"context"
	"net"
	"strconv"

	"github.com/capo-net/capo/pkg/calico/client"
	"github.com/capo-net/capo/pkg/reserve"
	"github.com/capo-net/capo/pkg/reserve/calicostore"
)

// Reservations are capo's reservations for the env's node, by address.
func (e *Env) Reservations() map[string]reserve.Entry {
	e.T.Helper()
	got, err := e.ReservationStore().ListNode(context.Background(), e.Node)
	if err != nil {
		e.T.Fatalf("reading reservations: %v", err)
	}
	out := map[string]reserve.Entry{}
	for _, r := range got {
		out[r.IP] = r
	}
	return out
}

// ReservationStore is capo's reservation store on the env's datastore: in
// projectcalico.org/v3 on a native-v3 bed, where Env.Calico is nil.
func (e *Env) ReservationStore() *calicostore.Store {
	e.T.Helper()
	if !e.nativeV3() {
		return calicostore.New(e.Calico, reserve.DefaultLimits)
	}
	objs, err := client.New(e.Bed.REST)
	if err != nil {
		e.T.Fatal(err)
	}
	return calicostore.NewOn(objs, reserve.DefaultLimits)
}

// Allocated reports whether Calico IPAM holds ip for some handle.
func (e *Env) Allocated(ip net.IP) bool {
	e.T.Helper()
	free, err := e.Free(context.Background(), ip)
	if err != nil {
		e.T.Fatal(err)
	}
	return !free
}

// AddPods creates n pods named prefix-<i> with opts and ADDs a sandbox for
// each through conflist.
func (e *Env) AddPods(prefix string, n int, conflist []byte, opts ...PodOption) []*Sandbox {
	e.T.Helper()
	var out []*Sandbox
	for i := range n {
		name := prefix + "-" + strconv.Itoa(i)
		sb := e.NewSandbox(e.CreatePod(name, opts...), conflist)
		if err := sb.Add(context.Background()); err != nil {
			e.T.Fatalf("ADD %s: %v", name, err)
		}
		out = append(out, sb)
	}
	return out
}
