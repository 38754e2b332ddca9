package nativev3

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/capo-net/capo/pkg/calico/ipam"
	"github.com/capo-net/capo/pkg/reserve"
	"github.com/capo-net/capo/test/testbed"
)

const ipamConfigurations = "/apis/projectcalico.org/v3/ipamconfigurations/default"

// setCooldown sets Calico's IPAMConfiguration ipCooldownSeconds until the
// test ends (it is cluster-wide).
func setCooldown(t *testing.T, seconds int) {
	t.Helper()
	cs, err := kubernetes.NewForConfig(bed.REST)
	if err != nil {
		t.Fatal(err)
	}
	rc := cs.CoreV1().RESTClient()
	set := func(s int) error {
		patch := fmt.Appendf(nil, `{"spec":{"ipCooldownSeconds":%d}}`, s)
		err := rc.Patch(types.MergePatchType).AbsPath(ipamConfigurations).Body(patch).Do(context.Background()).Error()
		if err == nil {
			return nil
		}
		body := fmt.Appendf(nil, `{"apiVersion":"projectcalico.org/v3","kind":"IPAMConfiguration","metadata":{"name":"default"},"spec":{"strictAffinity":false,"autoAllocateBlocks":true,"ipCooldownSeconds":%d}}`, s)
		return rc.Post().AbsPath("/apis/projectcalico.org/v3/ipamconfigurations").Body(body).Do(context.Background()).Error()
	}
	if err := set(seconds); err != nil {
		t.Fatalf("setting ipCooldownSeconds: %v", err)
	}
	t.Cleanup(func() {
		if err := set(0); err != nil {
			t.Errorf("resetting ipCooldownSeconds: %v", err)
		}
	})
}

// releasedAt is the releasedAt Calico's v3 IPAMBlock records for ip's
// allocation, "" when there is none.
func releasedAt(t *testing.T, ip string) string {
	t.Helper()
	cs, err := kubernetes.NewForConfig(bed.REST)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := cs.CoreV1().RESTClient().Get().AbsPath("/apis/projectcalico.org/v3/ipamblocks").DoRaw(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var l struct {
		Items []struct {
			Spec struct {
				CIDR        string `json:"cidr"`
				Allocations []*int `json:"allocations"`
				Attributes  []struct {
					ReleasedAt string `json:"releasedAt"`
				} `json:"attributes"`
			} `json:"spec"`
		} `json:"items"`
	}
	if err := json.Unmarshal(raw, &l); err != nil {
		t.Fatal(err)
	}
	addr := netip.MustParseAddr(ip)
	for _, b := range l.Items {
		p, err := netip.ParsePrefix(b.Spec.CIDR)
		if err != nil || !p.Contains(addr) {
			continue
		}
		o := 0
		for a := p.Masked().Addr(); a != addr; a = a.Next() {
			o++
		}
		if i := b.Spec.Allocations[o]; i != nil {
			return b.Spec.Attributes[*i].ReleasedAt
		}
	}
	return ""
}

// Calico master's IP cooldown, in native v3 mode: a released allocation
// stays in the IPAMBlock, pointed at an attribute that holds only
// releasedAt (no handle, no pod), and calico-ipam assigns it to nobody
// until it has cooled. capo's v3 reader reads it as cooling, nobody's:
// so when Calico frees a lost node's member before the pod is deleted, the
// controller still reserves the address (node-lost); read as "another
// pod's", it reserved nothing, and once cooled the address was the next
// pod's.
func TestV3CoolingAllocationIsReservedForItsMember(t *testing.T) {
	testbed.SkipWithoutCalicoFromEnv(t)
	ctx := context.Background()
	setCooldown(t, 300)
	env := bed.NewEnv(t, testbed.Kubernetes, testbed.EnvOptions{PoolPrefix: 29, OptIn: true, CalicoRelease: testbed.CalicoFromEnv})
	set := env.CreateStatefulSet("zk", 3)
	victim := env.AddPods("zk", 3, env.Conflist(testbed.Capo), testbed.OwnedBy(set))[1]
	env.MarkRunning(victim)
	env.SetConfig(releaseEverySecond)
	c := env.StartController("c1")
	c.WaitMetric(1, "capo_calico_api_info", `group="projectcalico.org/v3"`)
	c.WaitMetricAtLeast(1, "capo_controller_release_pass_duration_seconds_count")
	lostBefore := c.Metric("capo_controller_lost_nodes")
	env.Agent.Stop()
	env.SetNodeReady(corev1.ConditionUnknown)
	c.WaitMetric(lostBefore+1, "capo_controller_lost_nodes")

	// Calico frees the allocation first (its GC's release by handle).
	if _, err := env.ExecIPAM(ctx, "calico-ipam", "DEL", env.IPAMNetConf(testbed.PlainCalico), victim); err != nil {
		t.Fatalf("Calico's release of %s: %v", victim.IP(), err)
	}
	if releasedAt(t, victim.IP()) == "" {
		t.Fatalf("%s: no releasedAt in Calico's v3 IPAMBlock under ipCooldownSeconds", victim.IP())
	}
	h, err := ipam.Who(ctx, v3IPAM(t), netip.MustParseAddr(victim.IP()))
	if err != nil || h == nil || !h.Cooling || h.Handle != "" || h.Pod != "" {
		t.Fatalf("capo's v3 reader reads the cooling %s as %+v (%v), want cooling and nobody's", victim.IP(), h, err)
	}

	env.DeletePod(victim.Pod.Name, 0) // the pod GC force-deletes it
	eventually(t, 10*time.Second, victim.IP()+" reserved in v3 as node-lost while it cools", func() bool {
		r, ok := env.Reservations()[victim.IP()]
		return ok && r.Reason == reserve.ReasonNodeLost && r.Pod == victim.Pod.Name
	})
}

// A member that comes back while its address cools, in native v3 mode: the
// ADD succeeds with a fresh address (calico-ipam would assign the cooling
// one to nobody), the reservation stays, and the refusal says why:
// cooling, not "allocated to handle \"\"".
func TestV3ReturnWhileCoolingGetsAFreshAddress(t *testing.T) {
	testbed.SkipWithoutCalicoFromEnv(t)
	ctx := context.Background()
	setCooldown(t, 300)
	env := bed.NewEnv(t, testbed.Kubernetes, testbed.EnvOptions{PoolPrefix: 29, OptIn: true, CalicoRelease: testbed.CalicoFromEnv})
	conflist := env.Conflist(testbed.Capo)
	redis := testbed.StatefulPod("redis")
	old := env.AddPods("redis", 2, conflist, redis)[0]
	env.Evict(old.Pod.Name)
	if err := old.Del(ctx); err != nil {
		t.Fatal(err)
	}
	if !held(env, old.IP()) || releasedAt(t, old.IP()) == "" {
		t.Fatalf("%s: reserved %v, releasedAt %q: want reserved and cooling", old.IP(), held(env, old.IP()), releasedAt(t, old.IP()))
	}
	env.DeletePod(old.Pod.Name, 0)
	back := env.NewSandbox(env.CreatePod(old.Pod.Name, redis), conflist)
	if err := back.Add(ctx); err != nil {
		t.Fatalf("ADD of the returning %s while its address cools (a return must never fail an ADD): %v", old.Pod.Name, err)
	}
	if back.IP() == old.IP() {
		t.Fatalf("%s got its cooling %s", old.Pod.Name, old.IP())
	}
	if !held(env, old.IP()) {
		t.Fatalf("the reservation of the cooling %s ended", old.IP())
	}
	event(t, env, old.Pod.Name, "AddressNotReturned", "is cooling in Calico's IPAM")
	env.Agent.WaitMetric(1, "capo_agent_address_returns_total", `outcome="refused"`, `reason="cooling"`)
}
