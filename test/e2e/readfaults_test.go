package e2e

import (
	"context"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/capo-net/capo/test/testbed"
)

// blockFaults fails Calico's IPAM block reads of one process.
type blockFaults struct {
	opts testbed.AgentOptions // run the process so
	fail func() (heal func())
}

// faultyBlocks puts a fault proxy between the env's agent-to-be and
// Calico's datastore: the API server (429s and 500s are what a throttled or
// failing one answers) or etcd (a failed read).
func faultyBlocks(t *testing.T, env *testbed.Env) blockFaults {
	t.Helper()
	if env.DS == testbed.Etcd {
		f := bed.StartEtcdFaults(t)
		return blockFaults{
			opts: testbed.AgentOptions{Env: []string{"ETCD_ENDPOINTS=" + f.URL}},
			fail: func() func() { return f.FailReads(testbed.CalicoBlocks) },
		}
	}
	f := bed.StartAPIFaults(t)
	return blockFaults{
		opts: testbed.AgentOptions{Kubeconfig: f.Kubeconfig},
		fail: func() func() { return f.Fail(http.StatusInternalServerError, testbed.Reads("ipamblocks")) },
	}
}

// A block that cannot be read is no answer. libcalico-go's IPsByHandle logs
// and skips a block it cannot read and returns the rest with no error: for
// a member with no ADD record (started before its node was opted in, or
// its record lost) the agent read "this handle holds nothing", and
// capo-ipam let calico-ipam free the address unreserved. With the agent's
// block reads failing, the teardown is journaled and the address kept;
// once they heal, the journal's replay reserves it, then releases it.
func TestUnreadableBlockIsNoAnswer(t *testing.T) {
	eachDatastore(t, func(t *testing.T, ds testbed.Datastore) {
		ctx := context.Background()
		env := bed.NewEnv(t, ds, testbed.EnvOptions{OptIn: true, NoAgent: true})
		faults := faultyBlocks(t, env)
		env.Agent = env.StartAgentWith(faults.opts)
		sb := env.AddPods("db", 1, env.Conflist(testbed.Capo), testbed.OwnedBy(env.CreateStatefulSet("db", 1)))[0]
		if err := env.Journal().ForgetAddrs(testbed.NetworkName, sb.ContainerID, sb.IfName); err != nil {
			t.Fatal(err)
		}
		ip := net.ParseIP(sb.IP())
		heal := faults.fail()
		env.Evict(sb.Pod.Name)
		if err := sb.Del(ctx); err != nil {
			t.Fatal(err)
		}
		if !env.Allocated(ip) && !held(env, sb.IP()) {
			t.Fatalf("%s freed and unreserved while the agent could not read its block", ip)
		}
		if p, _ := env.Journal().Pending(); len(p) != 1 {
			t.Fatalf("%d teardowns journaled, want the member's", len(p))
		}
		heal()
		eventually(t, 30*time.Second, "the replay reserving, then releasing, the address", func() bool {
			p, _ := env.Journal().Pending()
			return len(p) == 0 && held(env, sb.IP()) && !env.Allocated(ip)
		})
	})
}
