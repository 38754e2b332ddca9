package e2e

import (
	"context"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/capo-net/capo/pkg/release"
	"github.com/capo-net/capo/test/testbed"
)

// A StatefulSet deleted with its pods and re-created under its name (a Helm
// reinstall): with capo.io/ip-reserve-on-recreate=keep its members get
// their addresses back; without, a new set inherits nothing.
func TestRecreatedStatefulSetGetsItsAddressesBack(t *testing.T) {
	eachDatastore(t, func(t *testing.T, ds testbed.Datastore) {
		ctx := context.Background()
		env := bed.NewEnv(t, ds, testbed.EnvOptions{PoolPrefix: 29, OptIn: true})
		env.SetConfig(configWith("ipReserveTime: 1h\n"))
		conflist := env.Conflist(testbed.Capo)
		sets := env.Kube.AppsV1().StatefulSets(env.Namespace)
		// Created with its annotations at once, as a chart does: a set
		// created without the opt-in ends the reservations.
		create := func(name string, keep bool) *appsv1.StatefulSet {
			var ann map[string]string
			if keep {
				ann = map[string]string{release.RecreateAnnotation: release.Keep}
			}
			return env.CreateStatefulSetAnnotated(name, 2, ann)
		}
		uninstall := func(name string, sbs []*testbed.Sandbox) {
			if err := sets.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			for _, sb := range sbs { // the garbage collector deletes the pods, the kubelet tears them down
				env.DeletePod(sb.Pod.Name, 0)
				if err := sb.Del(ctx); err != nil {
					t.Fatal(err)
				}
			}
		}
		kafka, redis := create("kafka", true), create("redis", false)
		k := env.AddPods("kafka", 2, conflist, testbed.OwnedBy(kafka))
		r := env.AddPods("redis", 2, conflist, testbed.OwnedBy(redis))
		env.StartController("c1")

		uninstall("kafka", k)
		uninstall("redis", r)
		eventually(t, 15*time.Second, "redis' addresses released (owner-gone)", func() bool { return !held(env, r[0].IP()) && !held(env, r[1].IP()) })
		if !held(env, k[0].IP()) || !held(env, k[1].IP()) {
			t.Fatalf("kafka's addresses released while it is away: %v", env.Reservations())
		}

		kafka = create("kafka", true) // reinstalled: a new UID
		eventually(t, 15*time.Second, "kafka's reservations handed to the new set", func() bool {
			rs := env.Reservations()
			return rs[k[0].IP()].OwnerUID == string(kafka.UID) && rs[k[1].IP()].OwnerUID == string(kafka.UID)
		})
		for i, old := range k {
			back := env.NewSandbox(env.CreatePod(old.Pod.Name, testbed.OwnedBy(kafka)), conflist)
			if err := back.Add(ctx); err != nil {
				t.Fatal(err)
			}
			if back.IP() != old.IP() {
				t.Fatalf("kafka-%d came back with %s, want its own %s", i, back.IP(), old.IP())
			}
		}
	})
}
