package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/capo-net/capo/pkg/reserve"
	"github.com/capo-net/capo/pkg/reserve/calicostore"
	"github.com/capo-net/capo/test/testbed"
)

// The controller plans a release on its read; before it writes, the pod is
// torn down again from another sandbox and the agent, another process,
// renews the reservation in the datastore. The controller's write conflicts
// and is made again on a fresh read: the renewed reservation must stay in
// the datastore, and the release report nothing released.
func TestReleaseKeepsAReservationRenewedSinceThePlan(t *testing.T) {
	eachDatastore(t, func(t *testing.T, ds testbed.Datastore) {
		ctx := context.Background()
		env := bed.NewEnv(t, ds, testbed.EnvOptions{NoAgent: true})
		agent := calicostore.New(newCalicoClient(t, ds), reserve.DefaultLimits)
		controller := calicostore.New(newCalicoClient(t, ds), reserve.DefaultLimits)
		first := time.Now().Add(-time.Hour).Truncate(time.Second).UTC()
		old := entry("10.247.0.1", first)
		old.Sandbox = "aaaaaaaaaaaaaaaa"
		if _, err := agent.Reserve(ctx, env.Node, []reserve.Entry{old, entry("10.247.0.2", first)}); err != nil {
			t.Fatal(err)
		}
		planned := nodeEntries(t, controller, env.Node)["10.247.0.1"] // the controller's read: its plan
		renewed := old
		renewed.Sandbox, renewed.ReservedAt = "bbbbbbbbbbbbbbbb", time.Now().Truncate(time.Second).UTC()
		if _, err := agent.Reserve(ctx, env.Node, []reserve.Entry{renewed}); err != nil {
			t.Fatal(err)
		}
		rel, err := controller.Release(ctx, []reserve.Ref{planned.Ref()})
		if err != nil || len(rel) != 0 {
			t.Fatalf("released %v %v: the planned reservation was renewed before the write", rel, err)
		}
		if controller.Conflicts() == 0 {
			t.Fatal("the controller's write did not conflict: the test proves nothing")
		}
		got := nodeEntries(t, calicostore.New(env.Calico, reserve.DefaultLimits), env.Node)
		if e, ok := got["10.247.0.1"]; !ok || e.Sandbox != renewed.Sandbox || !e.ReservedAt.Equal(renewed.ReservedAt) {
			t.Fatalf("10.247.0.1 in the datastore: %+v (held %v); the renewed reservation was released", e, ok)
		}
		if _, ok := got["10.247.0.2"]; !ok || len(got) != 2 {
			t.Fatalf("held %v", got)
		}
	})
}
