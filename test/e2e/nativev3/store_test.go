package nativev3

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/capo-net/capo/pkg/calico/client"
	"github.com/capo-net/capo/pkg/reserve"
	"github.com/capo-net/capo/pkg/reserve/calicostore"
	"github.com/capo-net/capo/test/testbed"
)

func entry(ip string, at time.Time) reserve.Entry {
	return reserve.Entry{
		IP: ip, Namespace: "kafka", Pod: "broker-" + ip, PodUID: "uid-" + ip, Reason: reserve.ReasonCNIDel,
		ReservedAt: at, OwnerKind: "StatefulSet", OwnerName: "broker", OwnerUID: "owner-uid",
	}
}

// capo's store writes and reads its reservations as native
// projectcalico.org/v3 IPReservations: real labels and annotations, no
// projectcalico.org/metadata, through Calico's v3 CRD's own validation.
func TestStoreWritesNativeV3Reservations(t *testing.T) {
	ctx := context.Background()
	env := bed.NewEnv(t, testbed.Kubernetes, testbed.EnvOptions{NoAgent: true})
	objs, err := client.New(bed.REST)
	if err != nil {
		t.Fatal(err)
	}
	s := calicostore.NewOn(objs, reserve.DefaultLimits)
	at := time.Now().Add(-time.Minute).Truncate(time.Second).UTC()
	res, err := s.Reserve(ctx, env.Node, []reserve.Entry{entry("10.250.0.1", at), entry("fd00:250::2", at)})
	if err != nil || len(res.Added) != 2 {
		t.Fatalf("reserve: %+v %v", res, err)
	}
	if res, err = s.Reserve(ctx, env.Node, []reserve.Entry{entry("10.250.0.1", time.Now())}); err != nil || len(res.AlreadyHeld) != 1 {
		t.Fatalf("reserve again: %+v %v", res, err)
	}
	got, err := s.ListNode(ctx, env.Node)
	if err != nil || len(got) != 2 {
		t.Fatalf("list node: %+v %v", got, err)
	}

	cs, err := bed.CalicoV3()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := cs.ProjectcalicoV3().IPReservations().List(ctx, metav1.ListOptions{LabelSelector: calicostore.ManagedByLabel + "=" + calicostore.ManagedBy})
	if err != nil || len(raw.Items) == 0 {
		t.Fatalf("capo's objects by a real label selector: %v %v", raw, err)
	}
	for _, o := range raw.Items {
		if _, ok := o.Annotations[client.MetadataAnnotation]; ok {
			t.Fatalf("%s carries %s: %v", o.Name, client.MetadataAnnotation, o.Annotations)
		}
		if o.UID == "" || len(o.Spec.ReservedCIDRs) == 0 {
			t.Fatalf("%s: %+v", o.Name, o)
		}
	}

	released, err := s.Release(ctx, []reserve.Ref{{Node: env.Node, IP: "10.250.0.1"}, {Node: env.Node, IP: "fd00:250::2"}})
	if err != nil || len(released) != 2 {
		t.Fatalf("release: %v %v", released, err)
	}
	if got, err := s.ListNode(ctx, env.Node); err != nil || len(got) != 0 {
		t.Fatalf("after release: %+v %v", got, err)
	}
}
