package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/capo-net/capo/pkg/reserve"
	"github.com/capo-net/capo/pkg/reserve/calicostore"
	"github.com/capo-net/capo/test/testbed"
)

func configWith(extra string) string {
	period := "ipReleasePeriod: 1s\n"
	if strings.Contains(extra, "ipReleasePeriod:") {
		period = ""
	}
	return "apiVersion: config.capo.io/v1\nkind: CapoConfig\n" + period + extra
}

// eventually polls cond for up to d.
// eventually is the bed's one wait, named short for these tests.
var eventually = testbed.Eventually

// calicoGCWait bounds a wait for Calico's own IPAM GC (kube-controllers,
// started by the test) to free a leaked allocation: its first sync and its
// grace take a few seconds alone, and many more on a machine busy with
// other test processes.
const calicoGCWait = 2 * time.Minute

func held(env *testbed.Env, ip string) bool {
	_, ok := env.Reservations()[ip]
	return ok
}

func seed(t *testing.T, env *testbed.Env, es ...reserve.Entry) {
	t.Helper()
	if _, err := calicostore.New(env.Calico, reserve.DefaultLimits).Reserve(context.Background(), env.Node, es); err != nil {
		t.Fatal(err)
	}
}

func TestTTLReleaseMakesTheAddressAllocatable(t *testing.T) {
	eachDatastore(t, func(t *testing.T, ds testbed.Datastore) {
		env := bed.NewEnv(t, ds, testbed.EnvOptions{PoolPrefix: 29, OptIn: true})
		env.SetConfig(configWith("ipReserveTime: 4s\n"))
		// Selected, but owned by nothing capo tracks: only the TTL can end it.
		selected := testbed.WithLabels(map[string]string{"statefulset.kubernetes.io/pod-name": "standalone"})
		victim, next := fillThenEvict(t, env, env.Conflist(testbed.Capo), selected)
		if next != "" || !held(env, victim.IP()) {
			t.Fatalf("setup: %s not reserved (next pod got %q)", victim.IP(), next)
		}
		c := env.StartController("c1")
		eventually(t, 15*time.Second, victim.IP()+" released by TTL", func() bool { return !held(env, victim.IP()) })
		sb := env.AddPods("after-ttl", 1, env.Conflist(testbed.Capo), selected)[0]
		if sb.IP() != victim.IP() {
			t.Fatalf("calico-ipam gave %s; the only free address is the released %s", sb.IP(), victim.IP())
		}
		c.WaitMetric(1, "capo_controller_releases_total", `reason="ttl"`)
	})
}

func TestMaxCountReleasesOldestFirst(t *testing.T) {
	eachDatastore(t, func(t *testing.T, ds testbed.Datastore) {
		env := bed.NewEnv(t, ds, testbed.EnvOptions{NoAgent: true})
		env.ClearReservations()
		env.SetConfig(configWith("ipReserveMaxCount: 2\n"))
		now := time.Now().Truncate(time.Second)
		var es []reserve.Entry
		for i, age := range []int{3, 5, 1, 4} { // minutes
			es = append(es, reserve.Entry{IP: fmt.Sprintf("10.253.0.%d", i+1), Namespace: env.Namespace, Pod: fmt.Sprintf("p-%d", i), Reason: reserve.ReasonCNIDel, ReservedAt: now.Add(-time.Duration(age) * time.Minute)})
		}
		seed(t, env, es...)
		c := env.StartController("c1")
		c.WaitMetric(2, "capo_controller_releases_total", `reason="max-count"`)
		got := env.Reservations()
		if len(got) != 2 || !held(env, "10.253.0.1") || !held(env, "10.253.0.3") {
			t.Fatalf("kept %v; want the two youngest, 10.253.0.1 (3m) and 10.253.0.3 (1m)", got)
		}
	})
}

func TestWorkloadGoneReleases(t *testing.T) {
	eachDatastore(t, func(t *testing.T, ds testbed.Datastore) {
		ctx := context.Background()
		env := bed.NewEnv(t, ds, testbed.EnvOptions{NoAgent: true})
		env.SetConfig(configWith("ipReleasePeriod: 1h\n")) // only events may trigger, not the timer
		apps := env.Kube.AppsV1().StatefulSets(env.Namespace)
		mkSet := func(name string, replicas, start int32) *appsv1.StatefulSet {
			s := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: appsv1.StatefulSetSpec{
				Replicas: &replicas, ServiceName: name,
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}},
					Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.invalid/x:1"}}},
				},
			}}
			if start > 0 {
				s.Spec.Ordinals = &appsv1.StatefulSetOrdinals{Start: start}
			}
			out, err := apps.Create(ctx, s, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			return out
		}
		web := mkSet("web", 3, 0)
		shard := mkSet("shard", 3, 5) // ordinals 5, 6, 7
		doomed := "ns-doomed-" + env.ID
		if _, err := env.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: doomed}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		now := time.Now()
		entry := func(ip, pod string, s *appsv1.StatefulSet) reserve.Entry { return memberEntry(env, now, ip, pod, s) }
		doomedEntry := entry("10.254.0.9", "x-0", nil)
		doomedEntry.Namespace = doomed
		seed(t, env, entry("10.254.0.1", "web-0", web), entry("10.254.0.2", "web-1", web), entry("10.254.0.3", "web-2", web),
			entry("10.254.0.5", "shard-5", shard), entry("10.254.0.6", "shard-6", shard), entry("10.254.0.7", "shard-7", shard),
			entry("10.254.0.8", "gone-0", &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "gone", UID: "uid-never-existed"}}),
			doomedEntry)
		c := env.StartController("c1")
		// No rule but the StatefulSet's absence applies yet.
		eventually(t, 10*time.Second, "gone-0's reservation released (owner gone)", func() bool { return !held(env, "10.254.0.8") })
		if len(env.Reservations()) != 7 {
			t.Fatalf("before any change: %v", env.Reservations())
		}

		scale := func(name string, n int32) {
			p, _ := json.Marshal(map[string]any{"spec": map[string]any{"replicas": n}})
			if _, err := apps.Patch(ctx, name, types.MergePatchType, p, metav1.PatchOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		scale("web", 1)
		scale("shard", 2)
		eventually(t, 10*time.Second, "scaled-down ordinals released", func() bool {
			return !held(env, "10.254.0.2") && !held(env, "10.254.0.3") && !held(env, "10.254.0.7")
		})
		for _, ip := range []string{"10.254.0.1", "10.254.0.5", "10.254.0.6"} {
			if !held(env, ip) {
				t.Fatalf("%s released though its ordinal is still wanted", ip)
			}
		}

		// A new StatefulSet of the same name is a new owner.
		if err := apps.Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		mkSet("web", 3, 0)
		eventually(t, 10*time.Second, "web-0 released once web was re-created", func() bool { return !held(env, "10.254.0.1") })

		// Namespace deletion: released at once, long before any TTL.
		if err := env.Kube.CoreV1().Namespaces().Delete(ctx, doomed, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, 10*time.Second, "the doomed namespace's reservation released", func() bool { return !held(env, "10.254.0.9") })
		c.WaitMetric(3, "capo_controller_releases_total", `reason="scaled-down"`)
		c.WaitMetric(2, "capo_controller_releases_total", `reason="owner-gone"`)
		c.WaitMetric(1, "capo_controller_releases_total", `reason="namespace-gone"`)
	})
}

func TestManualRelease(t *testing.T) {
	env := bed.NewEnv(t, testbed.Etcd, testbed.EnvOptions{NoAgent: true})
	now := time.Now()
	seed(t, env,
		reserve.Entry{IP: "10.255.0.1", Namespace: env.Namespace, Pod: "a-0", ReservedAt: now, Reason: reserve.ReasonCNIDel},
		reserve.Entry{IP: "10.255.0.2", Namespace: env.Namespace, Pod: "b-0", ReservedAt: now, Reason: reserve.ReasonCNIDel},
		reserve.Entry{IP: "10.255.0.3", Namespace: env.Namespace, Pod: "b-0", ReservedAt: now, Reason: reserve.ReasonCNIDel},
		reserve.Entry{IP: "10.255.0.4", Namespace: env.Namespace, Pod: "c-0", ReservedAt: now, Reason: reserve.ReasonCNIDel})
	c := env.StartController("c1")
	ask := func(v string) {
		askRelease(t, env, env.Namespace, v)
		eventually(t, 10*time.Second, "request "+v+" answered and removed", func() bool {
			cm, err := env.Kube.CoreV1().ConfigMaps(env.Namespace).Get(context.Background(), "capo-release", metav1.GetOptions{})
			_, pending := cm.Data[env.Node]
			return err == nil && !pending
		})
	}
	ask("10.255.0.1")
	if got := env.Reservations(); len(got) != 3 || held(env, "10.255.0.1") {
		t.Fatalf("one address: %v", got)
	}
	ask("pod=" + env.Namespace + "/b-0")
	if got := env.Reservations(); len(got) != 1 || !held(env, "10.255.0.4") {
		t.Fatalf("one pod: %v", got)
	}
	ask("all")
	if got := env.Reservations(); len(got) != 0 {
		t.Fatalf("whole node: %v", got)
	}
	c.WaitMetric(4, "capo_controller_releases_total", `reason="manual"`)
}

// A request first seen by a pass long after it was given (Calico's
// datastore locked meanwhile, no replica leading, or the last leader gone
// before clearing its key) releases what was reserved when it was given,
// not the pod's teardowns since: the replicas' watch, and where the API
// server records it the key's write, bound it.
func TestManualReleaseSeenLateSparesLaterTeardowns(t *testing.T) {
	env := bed.NewEnv(t, testbed.Kubernetes, testbed.EnvOptions{NoAgent: true})
	seed(t, env, reserve.Entry{IP: "10.255.0.1", Namespace: env.Namespace, Pod: "a-0", ReservedAt: time.Now().Add(-time.Minute), Reason: reserve.ReasonCNIDel})
	c := env.StartController("c1")
	lock(t, true) // no release pass can run
	askRelease(t, env, env.Namespace, "pod="+env.Namespace+"/a-0")
	time.Sleep(2 * time.Second) // the pod's next teardown, seconds later
	seed(t, env, reserve.Entry{IP: "10.255.0.2", Namespace: env.Namespace, Pod: "a-0", ReservedAt: time.Now(), Reason: reserve.ReasonCNIDel})
	time.Sleep(time.Second)
	if !held(env, "10.255.0.1") {
		t.Fatal("released while Calico's datastore was locked")
	}
	lock(t, false)
	eventually(t, 15*time.Second, "the request answered and removed", func() bool {
		cm, err := env.Kube.CoreV1().ConfigMaps(env.Namespace).Get(context.Background(), "capo-release", metav1.GetOptions{})
		_, pending := cm.Data[env.Node]
		return err == nil && !pending
	})
	if held(env, "10.255.0.1") || !held(env, "10.255.0.2") {
		t.Fatalf("held %v: want 10.255.0.1 released by the request and 10.255.0.2, reserved after it, kept", env.Reservations())
	}
	c.WaitMetric(1, "capo_controller_releases_total", `reason="manual"`)
}

// memberEntry is a teardown's reservation of ip for pod of env's namespace,
// reserved at now, owned by the StatefulSet s (none if nil).
func memberEntry(env *testbed.Env, now time.Time, ip, pod string, s *appsv1.StatefulSet) reserve.Entry {
	e := reserve.Entry{IP: ip, Namespace: env.Namespace, Pod: pod, Reason: reserve.ReasonCNIDel, ReservedAt: now}
	if s != nil {
		e.OwnerKind, e.OwnerName, e.OwnerUID = "StatefulSet", s.Name, string(s.UID)
	}
	return e
}

// askRelease asks for a release by hand as an operator does: the node's key
// in the release ConfigMap of capo's namespace.
func askRelease(t *testing.T, env *testbed.Env, ns, v string) {
	t.Helper()
	ctx := context.Background()
	cms := env.Kube.CoreV1().ConfigMaps(ns)
	if _, err := cms.Get(ctx, "capo-release", metav1.GetOptions{}); apierrors.IsNotFound(err) {
		_, err = cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "capo-release"}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
	}
	p, _ := json.Marshal(map[string]any{"data": map[string]string{env.Node: v}})
	if _, err := cms.Patch(ctx, "capo-release", types.MergePatchType, p, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

func TestLostNodeIsCovered(t *testing.T) {
	eachDatastore(t, func(t *testing.T, ds testbed.Datastore) {
		ctx := context.Background()
		env := bed.NewEnv(t, ds, testbed.EnvOptions{PoolPrefix: 29, OptIn: true})
		conflist := env.Conflist(testbed.Capo)
		set := env.CreateStatefulSet("zk", 9) // it stands: no owner-gone release
		sbs := env.AddPods("zk", 8, conflist, testbed.OwnedBy(set))
		victim := sbs[5]
		env.MarkRunning(victim)
		env.SetConfig(configWith(""))
		c := env.StartController("c1")
		c.WaitMetricAtLeast(1, "capo_controller_release_pass_duration_seconds_count")
		lostBefore := c.Metric("capo_controller_lost_nodes")
		env.Agent.Stop() // the node dies: no kubelet, no agent, no CNI DEL
		env.SetNodeReady(corev1.ConditionUnknown)
		c.WaitMetric(lostBefore+1, "capo_controller_lost_nodes")
		env.DeletePod(victim.Pod.Name, 0) // the pod GC force-deletes it
		eventually(t, 10*time.Second, victim.IP()+" reserved as node-lost", func() bool {
			r, ok := env.Reservations()[victim.IP()]
			return ok && r.Reason == reserve.ReasonNodeLost && r.OwnerName == "zk"
		})
		first := env.Reservations()[victim.IP()]
		// Calico's own IPAM GC frees the leaked allocation (the pod is gone).
		gc := bed.StartKubeControllers(t, ds, 4*time.Second)
		eventually(t, calicoGCWait, "Calico's GC freeing "+victim.IP(), func() bool { return !env.Allocated(victim.IPs[0]) })
		gc.Stop()
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
		// Seen is the controller's own stamp, made by whichever pass first
		// sees the entry; the DEL must change nothing else.
		again := env.Reservations()[victim.IP()]
		if again.Seen.IsZero() != first.Seen.IsZero() {
			first.Seen = again.Seen
		}
		if again != first {
			t.Fatalf("the late DEL changed the reservation: %+v -> %+v", first, again)
		}
	})
}

// A pod force-deleted from a lost node in the seconds after the leader dies,
// before the standby takes the lease, is still reserved: the standby saw it
// go and reserves it when it takes over.
func TestLostNodePodDeletedWhileNoReplicaLeads(t *testing.T) {
	eachDatastore(t, func(t *testing.T, ds testbed.Datastore) {
		env := bed.NewEnv(t, ds, testbed.EnvOptions{OptIn: true})
		sb := env.AddPods("redis", 1, env.Conflist(testbed.Capo), testbed.OwnedBy(env.CreateStatefulSet("redis", 1)))[0]
		env.MarkRunning(sb)
		env.SetConfig(configWith(""))
		leader, standby := startPair(t, env)
		env.Agent.Stop()
		env.SetNodeReady(corev1.ConditionUnknown)
		leader.WaitMetricAtLeast(1, "capo_controller_lost_nodes")

		leader.Kill()
		env.DeletePod(sb.Pod.Name, 0) // the pod GC, while the lease still names the dead leader
		standby.WaitMetricAtLeast(1, "capo_controller_lost_pods_remembered")
		if standby.Leading() {
			t.Fatal("the standby already leads: the deletion did not fall in the gap")
		}
		if _, ok := env.Reservations()[sb.IP()]; ok {
			t.Fatal("reserved before any replica led")
		}
		eventually(t, 15*time.Second, "the standby takes the lease", standby.Leading)
		eventually(t, 10*time.Second, sb.IP()+" reserved as node-lost by the new leader", func() bool {
			r, ok := env.Reservations()[sb.IP()]
			return ok && r.Reason == reserve.ReasonNodeLost && r.Pod == sb.Pod.Name
		})
		standby.WaitMetric(0, "capo_controller_lost_pods_remembered")
	})
}

func TestDeletedNodeIsCovered(t *testing.T) {
	env := bed.NewEnv(t, testbed.Kubernetes, testbed.EnvOptions{OptIn: true})
	sb := env.AddPods("kafka", 1, env.Conflist(testbed.Capo), testbed.OwnedBy(env.CreateStatefulSet("kafka", 1)))[0]
	env.MarkRunning(sb)
	env.StartController("c1")
	env.Agent.Stop()
	// Deleting the Node lets Calico's GC free its addresses at once.
	if err := env.Kube.CoreV1().Nodes().Delete(context.Background(), env.Node, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, sb.IP()+" reserved when its Node was deleted", func() bool {
		r, ok := env.Reservations()[sb.IP()]
		return ok && r.Reason == reserve.ReasonNodeLost
	})
}

// startPair starts two controller replicas and says which one leads.
func startPair(t *testing.T, env *testbed.Env) (leader, standby *testbed.Controller) {
	t.Helper()
	a, b := env.StartController("a"), env.StartController("b")
	eventually(t, 10*time.Second, "one leader", func() bool { return a.Leading() != b.Leading() })
	if b.Leading() {
		return b, a
	}
	return a, b
}

func TestLeaderFailoverLosesNothingAndReleasesOnce(t *testing.T) {
	eachDatastore(t, func(t *testing.T, ds testbed.Datastore) {
		env := bed.NewEnv(t, ds, testbed.EnvOptions{NoAgent: true})
		env.SetConfig(configWith("ipReserveTime: 6s\n"))
		leader, standby := startPair(t, env)
		// Twenty reservations falling due over ten seconds, across the failover.
		now := time.Now()
		var es []reserve.Entry
		for i := range 20 {
			es = append(es, reserve.Entry{
				IP: fmt.Sprintf("10.252.9.%d", i+1), Namespace: env.Namespace, Pod: fmt.Sprintf("p-%d", i),
				Reason: reserve.ReasonCNIDel, ReservedAt: now.Add(time.Duration(i)*500*time.Millisecond - 5*time.Second),
			})
		}
		seed(t, env, es...)
		time.Sleep(2 * time.Second)
		leader.Kill()
		eventually(t, 10*time.Second, "the standby takes the lease", standby.Leading)
		eventually(t, 30*time.Second, "all twenty released", func() bool { return len(env.Reservations()) == 0 })
		// Every address released exactly once, across both replicas' logs
		// (the killed one's log outlives it). A replica logs a release after
		// its write lands, so the last lines may follow the empty read.
		var count map[string]int
		logged := func() bool {
			count = map[string]int{}
			for _, c := range []*testbed.Controller{leader, standby} {
				for _, line := range strings.Split(c.Log(), "\n") {
					var l struct{ Msg, IP string }
					if json.Unmarshal([]byte(line), &l) == nil && l.Msg == "released" {
						count[l.IP]++
					}
				}
			}
			return len(count) == len(es)
		}
		if !logged() {
			time.Sleep(2 * time.Second)
			logged()
		}
		for _, e := range es {
			if count[e.IP] != 1 {
				t.Errorf("%s released %d times", e.IP, count[e.IP])
			}
		}
		if standby.Metric("capo_controller_releases_total", `reason="ttl"`) < 1 {
			t.Fatal("the new leader released nothing: the failover did not happen mid-run")
		}
	})
}
