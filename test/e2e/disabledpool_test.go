package e2e

import (
	"context"
	"net"
	"testing"

	"github.com/projectcalico/calico/libcalico-go/lib/options"

	"github.com/capo-net/capo/test/testbed"
)

// An address in a disabled pool is still its pod's. Calico's docs have an
// operator disable the old pool while migrating to a new one; its blocks
// keep their allocations until their pods go. libcalico-go's
// GetAssignmentAttributes looks for an address's block among enabled pools
// only, so there every address read as nobody's: a member torn down with
// no ADD record (started before its node was opted in, or its record
// lost) was answered "nothing to reserve" and freed unreserved.
func TestMemberInADisabledPoolIsReserved(t *testing.T) {
	eachDatastore(t, func(t *testing.T, ds testbed.Datastore) {
		ctx := context.Background()
		env := bed.NewEnv(t, ds, testbed.EnvOptions{OptIn: true})
		sb := env.AddPods("db", 1, env.Conflist(testbed.Capo), testbed.OwnedBy(env.CreateStatefulSet("db", 1)))[0]
		if err := env.Journal().ForgetAddrs(testbed.NetworkName, sb.ContainerID, sb.IfName); err != nil {
			t.Fatal(err)
		}
		pool, err := env.Calico.IPPools().Get(ctx, env.PoolName(), options.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		pool.Spec.Disabled = true
		if _, err := env.Calico.IPPools().Update(ctx, pool, options.SetOptions{}); err != nil {
			t.Fatal(err)
		}
		env.Evict(sb.Pod.Name)
		if err := sb.Del(ctx); err != nil {
			t.Fatal(err)
		}
		if !held(env, sb.IP()) {
			t.Fatalf("%s, in the disabled pool %s, freed unreserved (allocated: %v)", sb.IP(), pool.Name, env.Allocated(net.ParseIP(sb.IP())))
		}
	})
}
