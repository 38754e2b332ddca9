package e2e

import (
	"context"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/capo-net/capo/pkg/calico/apigroup"
	"github.com/capo-net/capo/test/testbed"
)

// Calico's datastore lock holds even while the API server's discovery
// fails. Calico locks its datastore (ClusterInformation datastoreReady
// false) before it migrates it; a reservation written after its copy began
// stays behind where Calico no longer reads. Calico's own plugin refuses
// every DEL meanwhile, but the agent also writes on its own: the journal's
// replays. Its write gate used to read the prober's last verdict, which a
// failed discovery left standing: the lock was never consulted and a
// journaled teardown was reserved into the locked datastore. Now the gate
// fails closed, and the replay waits for Calico to unlock.
func TestLockHoldsWhileDiscoveryFails(t *testing.T) {
	ctx := context.Background()
	env := bed.NewEnv(t, testbed.Kubernetes, testbed.EnvOptions{OptIn: true, NoAgent: true})
	faults := bed.StartAPIFaults(t)
	env.Agent = env.StartAgentWith(testbed.AgentOptions{Kubeconfig: faults.Kubeconfig})
	sb := env.AddPods("db", 1, env.Conflist(testbed.Capo), testbed.OwnedBy(env.CreateStatefulSet("db", 1)))[0]
	if err := env.Journal().ForgetAddrs(testbed.NetworkName, sb.ContainerID, sb.IfName); err != nil {
		t.Fatal(err)
	}
	// The teardown is journaled, and its replays fail, while the agent
	// cannot read Calico's blocks.
	healBlocks := faults.Fail(http.StatusInternalServerError, testbed.Reads("ipamblocks"))
	env.Evict(sb.Pod.Name)
	if err := sb.Del(ctx); err != nil {
		t.Fatal(err)
	}
	if p, _ := env.Journal().Pending(); len(p) != 1 {
		t.Fatalf("%d teardowns journaled, want 1", len(p))
	}

	healDiscovery := faults.Fail(http.StatusInternalServerError, testbed.Discovery)
	defer healDiscovery()
	lock(t, true)
	time.Sleep(5 * time.Second) // the lock's watch event, then a probe whose discovery fails
	healBlocks()
	time.Sleep(4 * time.Second) // replays, a second apart
	if held(env, sb.IP()) {
		t.Fatalf("%s reserved while Calico's datastore was locked", sb.IP())
	}
	if !env.Allocated(net.ParseIP(sb.IP())) {
		t.Fatalf("%s released unreserved", sb.IP())
	}
	healDiscovery()
	lock(t, false)
	eventually(t, 30*time.Second, "the journaled teardown reserved once Calico unlocked", func() bool {
		p, _ := env.Journal().Pending()
		return len(p) == 0 && held(env, sb.IP())
	})
}

// lock sets Calico's datastore lock in the bed's crd.projectcalico.org/v1,
// and lifts it when the test ends.
func lock(t *testing.T, locked bool) {
	t.Helper()
	if err := bed.LockCalico(context.Background(), apigroup.GroupV1, locked); err != nil {
		t.Fatal(err)
	}
	if locked {
		t.Cleanup(func() { _ = bed.LockCalico(context.Background(), apigroup.GroupV1, false) })
	}
}

// Without ClusterInformation default, capo cannot tell whether Calico has
// locked its datastore: it writes nothing, and says why, rather than
// taking the silence for "unlocked".
func TestNoClusterInformationIsSaid(t *testing.T) {
	ctx := context.Background()
	env := bed.NewEnv(t, testbed.Kubernetes, testbed.EnvOptions{OptIn: true})
	dyn, err := dynamic.NewForConfig(bed.REST)
	if err != nil {
		t.Fatal(err)
	}
	ci := dyn.Resource(schema.GroupVersionResource{Group: "crd.projectcalico.org", Version: "v1", Resource: "clusterinformations"})
	saved, err := ci.Get(ctx, "default", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := ci.Delete(ctx, "default", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		saved.SetResourceVersion("")
		saved.SetUID("")
		if _, err := ci.Create(context.Background(), saved, metav1.CreateOptions{}); err != nil {
			t.Errorf("restoring ClusterInformation default: %v", err)
		}
	})
	eventually(t, 20*time.Second, "the agent's /readyz saying ClusterInformation is absent", func() bool {
		code, body := env.Agent.Readyz()
		return code == http.StatusServiceUnavailable && strings.Contains(body, "ClusterInformation default does not exist")
	})
}
