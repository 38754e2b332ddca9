package e2e

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/capo-net/capo/pkg/release"
	"github.com/capo-net/capo/test/testbed"
)

// evict deletes a member's pod and tears its sandbox down, as an eviction
// does, and waits for its address to be held.
func evict(t *testing.T, env *testbed.Env, sb *testbed.Sandbox) {
	t.Helper()
	env.DeletePod(sb.Pod.Name, 0)
	if err := sb.Del(context.Background()); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, sb.Pod.Name+"'s "+sb.IP()+" held", func() bool { return held(env, sb.IP()) })
}

// The case: an evicted member of OpenKruise's Advanced
// StatefulSet keeps its address while its set exists, and its successor
// gets it back; a scale-down (replicas, reserveOrdinals) and the set's
// deletion end it, as for apps/v1.
func TestAdvancedStatefulSetMembersKeepTheirAddresses(t *testing.T) {
	eachDatastore(t, func(t *testing.T, ds testbed.Datastore) {
		ctx := context.Background()
		if err := bed.ApplyKruiseCRD(ctx); err != nil {
			t.Fatal(err)
		}
		env := bed.NewEnv(t, ds, testbed.EnvOptions{PoolPrefix: 28, OptIn: true})
		env.SetConfig(configWith("ipReserveTime: 1h\n"))
		conflist := env.Conflist(testbed.Capo)
		kafka := env.CreateKruiseSet("kafka", 3)
		k := env.AddPods("kafka", 3, conflist, testbed.KruiseOwnedBy(kafka))
		c := env.StartController("c1")

		evict(t, env, k[1])
		time.Sleep(3 * time.Second) // passes at 1s
		if !held(env, k[1].IP()) || c.Metric("capo_controller_releases_total", `reason="owner-gone"`) != 0 {
			t.Fatalf("kafka/kafka-1's %s released while its Advanced StatefulSet exists", k[1].IP())
		}
		back := env.NewSandbox(env.CreatePod("kafka-1", testbed.KruiseOwnedBy(kafka)), conflist)
		if err := back.Add(ctx); err != nil {
			t.Fatal(err)
		}
		if back.IP() != k[1].IP() {
			t.Fatalf("kafka-1 came back with %s, want its own %s", back.IP(), k[1].IP())
		}

		// Scaled below kafka-2's ordinal, as Kruise does it: replicas
		// first, then the member's pod deleted and torn down.
		env.PatchKruiseSet("kafka", map[string]any{"spec": map[string]any{"replicas": 2}})
		env.DeletePod("kafka-2", 0)
		if err := k[2].Del(ctx); err != nil {
			t.Fatal(err)
		}
		c.WaitMetric(1, "capo_controller_releases_total", `reason="scaled-down"`)
		eventually(t, 10*time.Second, "kafka-2's address released", func() bool { return !held(env, k[2].IP()) })

		// reserveOrdinals takes kafka-0's ordinal (the set's members are
		// then 1 and 2): its address ends.
		evict(t, env, k[0])
		time.Sleep(2 * time.Second)
		if !held(env, k[0].IP()) {
			t.Fatalf("kafka-0's %s released while its ordinal is the set's", k[0].IP())
		}
		env.PatchKruiseSet("kafka", map[string]any{"spec": map[string]any{"reserveOrdinals": []any{"0-0"}}})
		c.WaitMetric(2, "capo_controller_releases_total", `reason="scaled-down"`)
		eventually(t, 10*time.Second, "kafka-0's address released", func() bool { return !held(env, k[0].IP()) })

		// The set deleted: its evicted member's address ends.
		evict(t, env, back)
		env.DeleteKruiseSet("kafka")
		c.WaitMetric(1, "capo_controller_releases_total", `reason="owner-gone"`)
		eventually(t, 10*time.Second, "kafka-1's address released", func() bool { return !held(env, back.IP()) })
	})
}

// An Advanced StatefulSet's own policy annotations work as an apps/v1
// set's: its reservation time ends its evicted member's reservation, and
// its opt-in keeps a member's address across the set's deletion and
// re-creation, handed to the new set for the member's return.
func TestAdvancedStatefulSetPolicyAnnotations(t *testing.T) {
	ctx := context.Background()
	if err := bed.ApplyKruiseCRD(ctx); err != nil {
		t.Fatal(err)
	}
	env := bed.NewEnv(t, testbed.Kubernetes, testbed.EnvOptions{PoolPrefix: 28, OptIn: true})
	env.SetConfig(configWith("ipReserveTime: 1h\n"))
	conflist := env.Conflist(testbed.Capo)
	zk := env.CreateKruiseSet("zk", 2)
	env.PatchKruiseSet("zk", map[string]any{"metadata": map[string]any{"annotations": map[string]any{release.TTLAnnotation: "4s"}}})
	kafka := env.CreateKruiseSet("kafka", 3)
	keep := map[string]any{"metadata": map[string]any{"annotations": map[string]any{release.RecreateAnnotation: "keep"}}}
	env.PatchKruiseSet("kafka", keep)
	z := env.AddPods("zk", 2, conflist, testbed.KruiseOwnedBy(zk))
	k := env.AddPods("kafka", 3, conflist, testbed.KruiseOwnedBy(kafka))
	c := env.StartController("c1")

	evict(t, env, z[1])
	c.WaitMetric(1, "capo_controller_releases_total", `reason="ttl"`)
	eventually(t, 10*time.Second, "zk-1's address released by its set's 4s", func() bool { return !held(env, z[1].IP()) })

	evict(t, env, k[1])
	time.Sleep(2 * time.Second) // passes at 1s see the set's opt-in
	env.DeleteKruiseSet("kafka")
	time.Sleep(3 * time.Second)
	if !held(env, k[1].IP()) || c.Metric("capo_controller_releases_total", `reason="owner-gone"`) != 0 {
		t.Fatalf("kafka-1's %s released while its set, which keeps it across re-creation, is away", k[1].IP())
	}
	again := env.CreateKruiseSet("kafka", 3)
	env.PatchKruiseSet("kafka", keep)
	eventually(t, 10*time.Second, "kafka-1's reservation handed to the new set", func() bool {
		return env.Reservations()[k[1].IP()].OwnerUID == string(again.GetUID())
	})
	back := env.NewSandbox(env.CreatePod("kafka-1", testbed.KruiseOwnedBy(again)), conflist)
	if err := back.Add(ctx); err != nil {
		t.Fatal(err)
	}
	if back.IP() != k[1].IP() {
		t.Fatalf("kafka-1 came back with %s, want its own %s", back.IP(), k[1].IP())
	}
}

// A listed owner kind capo cannot watch (not served) never makes its
// members' reservations end as owner-gone: they stay, and an Event says why.
func TestUnwatchableOwnerKindHoldsAndSaysWhy(t *testing.T) {
	eachDatastore(t, func(t *testing.T, ds testbed.Datastore) {
		ctx := context.Background()
		env := bed.NewEnv(t, ds, testbed.EnvOptions{PoolPrefix: 29, OptIn: true})
		env.SetConfig(configWith("ipReserveTime: 1h\nownerKinds:\n- {group: brokers.capo-test.io, version: v1, kind: Broker}\n"))
		owned := testbed.WithOwnerRef(metav1.OwnerReference{APIVersion: "brokers.capo-test.io/v1", Kind: "Broker", Name: "b", UID: "broker-uid"})
		b := env.AddPods("b", 1, env.Conflist(testbed.Capo), testbed.StatefulPod("b"), owned)
		c := env.StartController("c1")
		evict(t, env, b[0])
		eventually(t, 15*time.Second, "an OwnerNotWatched event", func() bool {
			evs, err := env.Kube.CoreV1().Events(env.Namespace).List(ctx, metav1.ListOptions{FieldSelector: "reason=OwnerNotWatched,involvedObject.name=b"})
			return err == nil && len(evs.Items) > 0
		})
		if !held(env, b[0].IP()) || c.Metric("capo_controller_releases_total", `reason="owner-gone"`) != 0 {
			t.Fatalf("b-0's %s released: its owner's kind is not served, so it is never judged gone", b[0].IP())
		}
	})
}

// A listed owner kind is watched by its metadata: its members keep their
// addresses while it exists, get them back, and lose them when it is
// deleted; a listed kind's scale is not known, so no ordinal is released.
func TestListedOwnerKindMembersKeepTheirAddresses(t *testing.T) {
	eachDatastore(t, func(t *testing.T, ds testbed.Datastore) {
		ctx := context.Background()
		if err := bed.CreateCRD(ctx, "capo-test.io", "Broker", "brokers"); err != nil {
			t.Fatal(err)
		}
		env := bed.NewEnv(t, ds, testbed.EnvOptions{PoolPrefix: 29, OptIn: true})
		env.SetConfig(configWith("ipReserveTime: 1h\nownerKinds:\n- {group: capo-test.io, version: v1, kind: Broker}\n"))
		brokers := env.Dynamic().Resource(schema.GroupVersionResource{Group: "capo-test.io", Version: "v1", Resource: "brokers"}).Namespace(env.Namespace)
		b, err := brokers.Create(ctx, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "capo-test.io/v1", "kind": "Broker", "metadata": map[string]any{"name": "b"}, "spec": map[string]any{"size": int64(1)},
		}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		owned := testbed.WithOwnerRef(metav1.OwnerReference{APIVersion: "capo-test.io/v1", Kind: "Broker", Name: "b", UID: b.GetUID()})
		conflist := env.Conflist(testbed.Capo)
		m := env.AddPods("b", 2, conflist, testbed.StatefulPod("b"), owned)
		c := env.StartController("c1")

		evict(t, env, m[1]) // ordinal 1 of a Broker whose spec says size 1: not known to capo as a scale
		time.Sleep(3 * time.Second)
		if !held(env, m[1].IP()) || c.Metric("capo_controller_releases_total") != 0 {
			t.Fatalf("b-1's %s released while its Broker exists", m[1].IP())
		}
		back := env.NewSandbox(env.CreatePod("b-1", testbed.StatefulPod("b"), owned), conflist)
		if err := back.Add(ctx); err != nil {
			t.Fatal(err)
		}
		if back.IP() != m[1].IP() {
			t.Fatalf("b-1 came back with %s, want its own %s", back.IP(), m[1].IP())
		}
		evict(t, env, back)
		if err := brokers.Delete(ctx, "b", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		c.WaitMetric(1, "capo_controller_releases_total", `reason="owner-gone"`)
		eventually(t, 10*time.Second, "b-1's address released", func() bool { return !held(env, back.IP()) })
	})
}
