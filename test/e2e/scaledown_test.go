package e2e

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/capo-net/capo/pkg/release"
	"github.com/capo-net/capo/test/testbed"
)

// A StatefulSet that opts in keeps a scaled-down member's address held and
// gives it back on the scale-up; one that does not releases it at once.
func TestScaleDownKeepsTheAddressWhenTheSetOptsIn(t *testing.T) {
	eachDatastore(t, func(t *testing.T, ds testbed.Datastore) {
		ctx := context.Background()
		env := bed.NewEnv(t, ds, testbed.EnvOptions{PoolPrefix: 29, OptIn: true})
		env.SetConfig(configWith("ipReserveTime: 1h\n"))
		conflist := env.Conflist(testbed.Capo)
		sets := env.Kube.AppsV1().StatefulSets(env.Namespace)
		kafka, redis := env.CreateStatefulSet("kafka", 2), env.CreateStatefulSet("redis", 2)
		patch := func(name string, body map[string]any) {
			p, _ := json.Marshal(body)
			if _, err := sets.Patch(ctx, name, types.MergePatchType, p, metav1.PatchOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		patch("kafka", map[string]any{"metadata": map[string]any{"annotations": map[string]string{release.ScaleDownAnnotation: release.Keep}}})
		k := env.AddPods("kafka", 2, conflist, testbed.OwnedBy(kafka))
		r := env.AddPods("redis", 2, conflist, testbed.OwnedBy(redis))
		env.StartController("c1")

		// Both scale down to one, as the StatefulSet controller does:
		// replicas first, then the last member's pod deleted and torn down.
		for _, sb := range []*testbed.Sandbox{k[1], r[1]} {
			patch(sb.Pod.Labels["app"], map[string]any{"spec": map[string]any{"replicas": 1}})
			env.DeletePod(sb.Pod.Name, 0)
			if err := sb.Del(ctx); err != nil {
				t.Fatal(err)
			}
		}
		eventually(t, 15*time.Second, "redis-1's address released (scaled-down)", func() bool { return !held(env, r[1].IP()) })
		time.Sleep(2 * time.Second) // passes at 1s: kafka-1's stays
		if !held(env, k[1].IP()) {
			t.Fatalf("kafka-1's %s released; kafka keeps scaled-down members'", k[1].IP())
		}

		// kafka scales up again: kafka-1 gets its own address back.
		patch("kafka", map[string]any{"spec": map[string]any{"replicas": 2}})
		back := env.NewSandbox(env.CreatePod("kafka-1", testbed.OwnedBy(kafka)), conflist)
		if err := back.Add(ctx); err != nil {
			t.Fatal(err)
		}
		if back.IP() != k[1].IP() {
			t.Fatalf("kafka-1 came back with %s, want its own %s", back.IP(), k[1].IP())
		}
	})
}
