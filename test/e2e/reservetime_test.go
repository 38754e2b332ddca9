package e2e

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/capo-net/capo/pkg/release"
	"github.com/capo-net/capo/pkg/reserve"
	"github.com/capo-net/capo/test/testbed"
)

// capo.io/ip-reserve-time on a pod, a StatefulSet or the namespace decides
// how long their addresses stay held, over ipReserveTime; a wrong value is
// ignored with an Event, and capoctl shows whose time applies.
func TestReservationTimePerWorkload(t *testing.T) {
	eachDatastore(t, func(t *testing.T, ds testbed.Datastore) {
		ctx := context.Background()
		env := bed.NewEnv(t, ds, testbed.EnvOptions{NoAgent: true})
		env.SetConfig(configWith("ipReserveTime: 2s\n"))
		env.AnnotateNamespace(map[string]string{release.TTLAnnotation: "1h"})
		annotated := func(name, ttl string) *appsv1.StatefulSet {
			if ttl == "" {
				return env.CreateStatefulSet(name, 3)
			}
			return env.CreateStatefulSetAnnotated(name, 3, map[string]string{release.TTLAnnotation: ttl})
		}
		fast, slow, bad := annotated("fast", "3s"), annotated("slow", ""), annotated("bad", "soon")
		env.CreatePod("pinned-0", testbed.WithAnnotations(map[string]string{release.TTLAnnotation: "4s"}))
		now := time.Now()
		entry := func(ip, pod string, s *appsv1.StatefulSet) reserve.Entry { return memberEntry(env, now, ip, pod, s) }
		seed(t, env, entry("10.251.0.1", "fast-0", fast), entry("10.251.0.2", "slow-0", slow), entry("10.251.0.3", "bad-0", bad), entry("10.251.0.4", "pinned-0", nil))

		out, code := capoctl(t, env, "", "list", "-n", env.Namespace, "-o", "json")
		var rows []struct{ IP, ReserveTime, ReserveTimeFrom string }
		if err := json.Unmarshal([]byte(out), &rows); err != nil || code != 0 {
			t.Fatalf("list: exit %d, %v\n%s", code, err, out)
		}
		from := map[string]string{}
		for _, r := range rows {
			from[r.IP] = r.ReserveTime + " " + r.ReserveTimeFrom
		}
		want := map[string]string{"10.251.0.1": "3s statefulset", "10.251.0.2": "1h0m0s namespace", "10.251.0.3": "1h0m0s namespace", "10.251.0.4": "4s pod"}
		for ip, w := range want {
			if from[ip] != w {
				t.Fatalf("list: %s has %q, want %q (all: %v)", ip, from[ip], w, from)
			}
		}

		c := env.StartController("c1")
		eventually(t, 20*time.Second, "the StatefulSet's 3s and the pod's 4s end theirs", func() bool { return !held(env, "10.251.0.1") && !held(env, "10.251.0.4") })
		// At least: the bed's controllers release cluster-wide, and what earlier
		// tests left held ends by the TTL here too.
		c.WaitMetricAtLeast(2, "capo_controller_releases_total", `reason="ttl"`)
		eventually(t, 10*time.Second, "an InvalidReservationTime Event on StatefulSet bad", func() bool {
			evs, err := env.Kube.CoreV1().Events(env.Namespace).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=bad,reason=InvalidReservationTime"})
			return err == nil && len(evs.Items) > 0
		})
		time.Sleep(3 * time.Second) // past ipReserveTime (2s) again: the namespace's hour holds them
		if !held(env, "10.251.0.2") || !held(env, "10.251.0.3") {
			t.Fatalf("released under the namespace's hour: %v", env.Reservations())
		}
		out, code = capoctl(t, env, "", "explain", env.Namespace+"/pinned-0")
		if code != 0 {
			t.Fatalf("explain: exit %d\n%s", code, out)
		}
	})
}
