package nativev3

import (
	"context"
	"strings"
	"testing"
	"time"

	apiv3 "github.com/projectcalico/api/pkg/apis/projectcalico/v3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/capo-net/capo/pkg/calico/client"
	"github.com/capo-net/capo/pkg/reserve"
	"github.com/capo-net/capo/pkg/reserve/calicostore"
	"github.com/capo-net/capo/test/testbed"
)

// One IPReservation that does not read must not stop every list. In native
// v3 an object whose projectcalico.org/metadata does not decode (a copy
// of a v1 object, damaged) failed capo's whole List, so the controller
// released and covered nothing; crd.projectcalico.org/v1 skips such an
// object. The same rule in both modes now: skipped, reported (the
// metric, a Warning Event, capoctl status), and everything else carries on.
func TestV3UnreadableReservationIsSkippedAndReported(t *testing.T) {
	ctx := context.Background()
	env := bed.NewEnv(t, testbed.Kubernetes, testbed.EnvOptions{NoAgent: true})
	at := time.Now().Add(-2 * time.Hour).UTC().Truncate(time.Second)
	e := reserve.Entry{IP: "10.251.0.7", Namespace: env.Namespace, Pod: "web-0", PodUID: "u", Reason: reserve.ReasonCNIDel, ReservedAt: at, Seen: at} // its time counts from when a controller first saw it
	if _, err := env.ReservationStore().Reserve(ctx, env.Node, []reserve.Entry{e}); err != nil {
		t.Fatal(err)
	}
	cs, err := bed.CalicoV3()
	if err != nil {
		t.Fatal(err)
	}
	bad := apiv3.NewIPReservation()
	bad.Name = calicostore.BucketName((calicostore.BucketOf(env.Node)+1)%16, 7)
	bad.Annotations = map[string]string{client.MetadataAnnotation: `{"labels":{"app.kubernetes.io/managed-by":`}
	bad.Spec.ReservedCIDRs = []string{"10.251.9.9/32"}
	if _, err := cs.ProjectcalicoV3().IPReservations().Create(ctx, bad, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cs.ProjectcalicoV3().IPReservations().Delete(context.Background(), bad.Name, metav1.DeleteOptions{})
	})

	env.SetConfig(releaseEverySecond + "ipReserveTime: 1h\n")
	c := env.StartController("c1")
	c.WaitMetric(1, "capo_calico_api_info", `group="projectcalico.org/v3"`)
	eventually(t, 30*time.Second, e.IP+" released past the unreadable object (TTL)", func() bool { return !held(env, e.IP) })
	c.WaitMetric(1, "capo_controller_unreadable_reservation_objects")
	eventually(t, 10*time.Second, "a Warning Event naming "+bad.Name, func() bool {
		evs, err := env.Kube.CoreV1().Events("").List(ctx, metav1.ListOptions{FieldSelector: "reason=UnreadableReservation"})
		if err != nil {
			return false
		}
		for _, ev := range evs.Items {
			if ev.Type == corev1.EventTypeWarning && ev.InvolvedObject.Name == bad.Name {
				return true
			}
		}
		return false
	})
	if out, _ := env.Capoctl(nil, "status", "-o", "json"); !strings.Contains(out, bad.Name) {
		t.Fatalf("capoctl status does not name %s:\n%s", bad.Name, out)
	}
}
