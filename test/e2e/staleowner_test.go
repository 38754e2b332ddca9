package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/capo-net/capo/test/testbed"
)

// A watch that is not serving is no answer (the soak's stale StatefulSet,
// docs/robustness.md). The leader's watch of StatefulSets is cut and its
// lists and watches fail, as in an API outage with its reflector backing
// off; mq is scaled from 1 to 4 in the API server meanwhile, and member 2
// torn down. The leader's cache still says 1 replica, but a GET says 4:
// member 2's reservation is not released as scaled-down, pass after
// pass. Once the watch heals it is kept without being held back, and a
// real scale-down to 2 releases it.
func TestStaleOwnerCacheIsNoAnswer(t *testing.T) {
	env := bed.NewEnv(t, testbed.Etcd, testbed.EnvOptions{OptIn: true})
	env.SetConfig(configWith("ipReserveTime: 1h\n"))
	mq := env.CreateStatefulSet("mq", 1)
	member := env.AddPods("mq", 3, env.Conflist(testbed.Capo), testbed.OwnedBy(mq))[2]
	c, heal := staleSetsLeader(t, env)
	const scaledDown = `reason="scaled-down"`
	scale := func(n int) { patchSet(t, env, "mq", map[string]any{"spec": map[string]any{"replicas": n}}) }
	scale(4)
	evictMember(t, env, member)
	after := c.Metric(releasePasses)
	eventually(t, 15*time.Second, "three passes after the teardown", func() bool { return c.Metric(releasePasses) >= after+3 })
	if !held(env, member.IP()) {
		t.Fatalf("mq-2's %s released (scaled-down releases: %v) though the API server's mq has 4 replicas: the leader judged by its stale cache",
			member.IP(), c.Metric("capo_controller_releases_total", scaledDown))
	}
	if n := c.Metric("capo_controller_releases_held_back_total", scaledDown, `cause="disagrees"`); n < 1 {
		t.Fatalf("%v scaled-down releases held back, want mq-2's, pass after pass", n)
	}

	// Healed: the reflector lists again (after its backoff), and the
	// cache's mq has 4 replicas; no pass holds anything back.
	heal()
	last, since := -1.0, 0.0
	eventually(t, 60*time.Second, "passes that hold nothing back (the watch healed)", func() bool {
		h, p := c.Metric("capo_controller_releases_held_back_total"), c.Metric(releasePasses)
		if h != last {
			last, since = h, p
			return false
		}
		return p >= since+3
	})
	if !held(env, member.IP()) {
		t.Fatalf("mq-2's %s released once the watch healed; mq has 4 replicas", member.IP())
	}
	scale(2)
	eventually(t, 15*time.Second, "mq-2's reservation released once mq is scaled down to 2", func() bool { return !held(env, member.IP()) })
	if n := c.Metric("capo_controller_releases_total", scaledDown); n != 1 {
		t.Fatalf("%v scaled-down releases, want mq-2's", n)
	}
}

// A reservation time read from a stale cache is no answer either (the
// soak's early ttl releases). mq asks 3s; the leader's watch of
// StatefulSets is cut and fails; mq is made to ask 1h in the API server,
// and member 1 torn down. The leader's cache still says 3s, but a GET says
// 1h: the member's reservation is not released as due, pass after pass.
// Once mq asks 3s again, it is.
func TestStaleReservationTimeIsNoAnswer(t *testing.T) {
	env := bed.NewEnv(t, testbed.Etcd, testbed.EnvOptions{OptIn: true})
	env.SetConfig(configWith("ipReserveTime: 1h\n"))
	mq := env.CreateStatefulSet("mq", 2)
	member := env.AddPods("mq", 2, env.Conflist(testbed.Capo), testbed.OwnedBy(mq))[1]
	ask := func(ttl string) {
		patchSet(t, env, "mq", map[string]any{"metadata": map[string]any{"annotations": map[string]string{"capo.io/ip-reserve-time": ttl}}})
	}
	ask("3s")
	c, heal := staleSetsLeader(t, env)
	t.Cleanup(heal)
	const ttl = `reason="ttl"`
	ask("1h")
	evictMember(t, env, member)
	time.Sleep(4 * time.Second) // past the 3s the cache says
	after := c.Metric(releasePasses)
	eventually(t, 15*time.Second, "three more passes", func() bool { return c.Metric(releasePasses) >= after+3 })
	if !held(env, member.IP()) {
		t.Fatalf("mq-1's %s released (ttl releases: %v) though the API server's mq asks 1h: the leader judged by its stale cache",
			member.IP(), c.Metric("capo_controller_releases_total", ttl))
	}
	if n := c.Metric("capo_controller_releases_held_back_total", ttl, `cause="disagrees"`); n < 1 {
		t.Fatalf("%v ttl releases held back, want mq-1's, pass after pass", n)
	}
	ask("3s")
	eventually(t, 15*time.Second, "mq-1's reservation released once mq asks 3s again", func() bool { return !held(env, member.IP()) })
	if n := c.Metric("capo_controller_releases_total", ttl); n != 1 {
		t.Fatalf("%v ttl releases, want mq-1's", n)
	}
}

// releasePasses counts capo-controller's release passes.
const releasePasses = "capo_controller_release_pass_duration_seconds_count"

// staleSetsLeader starts capo-controller on env behind the fault proxy,
// waits until it leads and has made a pass, then cuts its watch of
// StatefulSets and fails their lists and watches, as an API outage does
// with its reflector backing off; heal ends that.
func staleSetsLeader(t *testing.T, env *testbed.Env) (c *testbed.Controller, heal func()) {
	t.Helper()
	faults := bed.StartAPIFaults(t)
	c = env.StartControllerWith("c1", testbed.AgentOptions{Kubeconfig: faults.Kubeconfig})
	eventually(t, 15*time.Second, "the controller leads", c.Leading)
	c.WaitMetricAtLeast(1, releasePasses)
	sets := testbed.Collection("apps", "statefulsets")
	heal = faults.Fail(http.StatusServiceUnavailable, sets)
	if n := faults.Cut(sets); n == 0 {
		heal()
		t.Fatal("the controller had no watch of StatefulSets open through the proxy")
	}
	eventually(t, 10*time.Second, "the controller's list or watch of StatefulSets failing", func() bool { return faults.Failed.Load() > 0 })
	return c, heal
}

// patchSet merges patch into the StatefulSet name, in the API server.
func patchSet(t *testing.T, env *testbed.Env, name string, patch map[string]any) {
	t.Helper()
	p, _ := json.Marshal(patch)
	if _, err := env.Kube.AppsV1().StatefulSets(env.Namespace).Patch(context.Background(), name, types.MergePatchType, p, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

// evictMember has the kubelet evict member and tear its sandbox down
// through capo, which reserves its address.
func evictMember(t *testing.T, env *testbed.Env, member *testbed.Sandbox) {
	t.Helper()
	env.Evict(member.Pod.Name)
	if err := member.Del(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !held(env, member.IP()) {
		t.Fatalf("setup: %s's %s not reserved by its teardown", member.Pod.Name, member.IP())
	}
}
