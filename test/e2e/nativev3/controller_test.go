package nativev3

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/capo-net/capo/pkg/reserve"
	"github.com/capo-net/capo/test/testbed"
)

const releaseEverySecond = "apiVersion: config.capo.io/v1\nkind: CapoConfig\nipReleasePeriod: 1s\n"

// A lost node in native v3 mode, as TestLostNodeIsCovered proves it in
// crd.projectcalico.org/v1: the controller, in v3, reserves the address of
// a member force-deleted from a node whose agent is away (node-lost);
// Calico then frees the leaked allocation (its GC's release, made here by
// the v3-mode calico-ipam itself: no kube-controllers in v3 mode is built
// here), and the next pod of the full pool gets no address. The node's
// late DEL changes nothing.
func TestV3LostNodeCoveredThroughCalicosRelease(t *testing.T) {
	testbed.SkipWithoutCalicoFromEnv(t)
	ctx := context.Background()
	env := bed.NewEnv(t, testbed.Kubernetes, testbed.EnvOptions{PoolPrefix: 29, OptIn: true, CalicoRelease: testbed.CalicoFromEnv})
	conflist := env.Conflist(testbed.Capo)
	set := env.CreateStatefulSet("zk", 9) // it stands: no owner-gone release
	sbs := env.AddPods("zk", 8, conflist, testbed.OwnedBy(set))
	victim := sbs[5]
	env.MarkRunning(victim)
	env.SetConfig(releaseEverySecond)
	c := env.StartController("c1")
	c.WaitMetric(1, "capo_calico_api_info", `group="projectcalico.org/v3"`)
	c.WaitMetricAtLeast(1, "capo_controller_release_pass_duration_seconds_count")
	lostBefore := c.Metric("capo_controller_lost_nodes")
	env.Agent.Stop() // the node dies: no kubelet, no agent, no CNI DEL
	env.SetNodeReady(corev1.ConditionUnknown)
	c.WaitMetric(lostBefore+1, "capo_controller_lost_nodes")
	env.DeletePod(victim.Pod.Name, 0) // the pod GC force-deletes it
	eventually(t, 10*time.Second, victim.IP()+" reserved in v3 as node-lost", func() bool {
		r, ok := env.Reservations()[victim.IP()]
		return ok && r.Reason == reserve.ReasonNodeLost && r.OwnerName == "zk"
	})
	first := env.Reservations()[victim.IP()]

	// Calico releases the leaked allocation by its handle, as its GC does.
	if _, err := env.ExecIPAM(ctx, "calico-ipam", "DEL", env.IPAMNetConf(testbed.PlainCalico), victim); err != nil {
		t.Fatalf("Calico's release of %s: %v", victim.IP(), err)
	}
	if allocated(t, victim.IP()) {
		t.Fatalf("%s still allocated after Calico released it", victim.IP())
	}
	next := env.NewSandbox(env.CreatePod("zk-8", testbed.OwnedBy(set)), conflist)
	if err := next.Add(ctx); err == nil {
		t.Fatalf("new pod got %s; the only free address is the lost pod's reserved %s", next.IP(), victim.IP())
	}

	// The node comes back and its kubelet tears the old sandbox down.
	env.SetNodeReady(corev1.ConditionTrue)
	env.Agent = env.StartAgent()
	if err := victim.Del(ctx); err != nil {
		t.Fatalf("the returning node's DEL: %v", err)
	}
	again := env.Reservations()[victim.IP()]
	if again.Seen.IsZero() != first.Seen.IsZero() { // the controller's own stamp
		first.Seen = again.Seen
	}
	if again != first {
		t.Fatalf("the late DEL changed the reservation: %+v -> %+v", first, again)
	}
}

// A release in native v3 mode, as TestWorkloadGoneReleases and
// TestTTLReleaseMakesTheAddressAllocatable prove it in v1: an evicted
// member's address is reserved in v3; its StatefulSet is deleted; the
// controller, in v3, releases the reservation (owner-gone), and the
// v3-mode calico-ipam gives the address to the next pod of the full pool.
func TestV3OwnerGoneReleaseMakesTheAddressAllocatable(t *testing.T) {
	testbed.SkipWithoutCalicoFromEnv(t)
	ctx := context.Background()
	env := bed.NewEnv(t, testbed.Kubernetes, testbed.EnvOptions{PoolPrefix: 29, OptIn: true, CalicoRelease: testbed.CalicoFromEnv})
	conflist := env.Conflist(testbed.Capo)
	set := env.CreateStatefulSet("kafka", 8)
	sbs := env.AddPods("kafka", 8, conflist, testbed.OwnedBy(set))
	victim := sbs[2]
	env.Evict(victim.Pod.Name)
	if err := victim.Del(ctx); err != nil {
		t.Fatal(err)
	}
	env.DeletePod(victim.Pod.Name, 0)
	if r, ok := env.Reservations()[victim.IP()]; !ok || r.OwnerName != "kafka" {
		t.Fatalf("%s not reserved in v3 for the set's member: %v", victim.IP(), env.Reservations())
	}
	env.SetConfig(releaseEverySecond)
	c := env.StartController("c1")
	c.WaitMetric(1, "capo_calico_api_info", `group="projectcalico.org/v3"`)
	c.WaitMetricAtLeast(1, "capo_controller_release_pass_duration_seconds_count")
	if !held(env, victim.IP()) {
		t.Fatalf("%s released while its StatefulSet stands", victim.IP())
	}

	if err := env.Kube.AppsV1().StatefulSets(env.Namespace).Delete(ctx, set.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, victim.IP()+" released (owner gone)", func() bool { return !held(env, victim.IP()) })
	c.WaitMetric(1, "capo_controller_releases_total", `reason="owner-gone"`)
	sb := env.AddPods("after", 1, env.Conflist(testbed.PlainCalico))[0]
	if sb.IP() != victim.IP() {
		t.Fatalf("calico-ipam gave %s; the only free address is the released %s", sb.IP(), victim.IP())
	}
}
