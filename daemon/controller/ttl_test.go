package controller

import (
	"context"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/capo-net/capo/pkg/release"
	"github.com/capo-net/capo/pkg/reserve"
)

func annotatedSet(ns, name, uid, ttl string) *appsv1.StatefulSet {
	three := int32(3)
	return &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("sts-" + uid), Annotations: map[string]string{release.TTLAnnotation: ttl}},
		Spec:       appsv1.StatefulSetSpec{Replicas: &three},
	}
}

func ofSet(e reserve.Entry, name, uid string) reserve.Entry {
	e.OwnerKind, e.OwnerName, e.OwnerUID = "StatefulSet", name, "sts-"+uid
	return e
}

func TestPassHonoursReservationTimeAnnotations(t *testing.T) {
	zoo := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "zoo", Annotations: map[string]string{release.TTLAnnotation: "10m"}}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "zoo", Name: "keeper-0", Annotations: map[string]string{release.TTLAnnotation: "3h"}}}
	b := newPassBed(t, zoo, pod,
		annotatedSet("kafka", "broker", "1", "6h"),
		annotatedSet("kafka", "zk", "2", "soon"),
	)
	// ipReserveTime is 1h.
	b.reserve("n1",
		ofSet(held("10.0.0.1", "kafka", "broker-0", 5*time.Hour), "broker", "1"), // StatefulSet: 6h, kept
		ofSet(held("10.0.0.2", "kafka", "broker-1", 7*time.Hour), "broker", "1"), // released
		ofSet(held("10.0.0.3", "kafka", "zk-0", 2*time.Hour), "zk", "2"),         // invalid: 1h, released
		held("10.0.0.4", "zoo", "web-x", 11*time.Minute),                         // namespace: 10m, released
		held("10.0.0.5", "zoo", "keeper-0", 2*time.Hour),                         // pod: 3h, kept
	)
	b.pass()
	got := b.held()
	if _, ok := got["10.0.0.1"]; !ok || len(got) != 2 || got["10.0.0.5"].IP == "" {
		t.Fatalf("kept %v; want 10.0.0.1 and 10.0.0.5", got)
	}
	reasons := b.eventReasons()
	if n := countOf(reasons, "InvalidReservationTime"); n != 1 {
		t.Fatalf("events %v: want one InvalidReservationTime", reasons)
	}
	b.pass()
	if n := countOf(b.eventReasons(), "InvalidReservationTime"); n != 0 {
		t.Fatal("the same invalid value was reported again")
	}
}

// The operator's maxIPReserveTime caps what a tenant's annotation asks
// for, at every level, with a Warning Event on the object once; what is
// below the cap is untouched.
func TestPassCapsReservationTimeAnnotations(t *testing.T) {
	tenant := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "tenant", Annotations: map[string]string{release.TTLAnnotation: "720h"}}}
	b := newPassBed(t, tenant, annotatedSet("kafka", "broker", "1", "720h"), annotatedSet("kafka", "zk", "2", "2h"))
	cfg := *b.c.config.Get()
	cfg.MaxIPReserveTime = 3 * time.Hour
	b.c.config.Set(&cfg)
	b.reserve("n1",
		ofSet(held("10.0.0.1", "kafka", "broker-0", 4*time.Hour), "broker", "1"), // 720h cut to 3h: released
		ofSet(held("10.0.0.2", "kafka", "broker-1", 2*time.Hour), "broker", "1"), // under the cap: kept
		ofSet(held("10.0.0.3", "kafka", "zk-0", 90*time.Minute), "zk", "2"),      // 2h, below the cap: kept
		held("10.0.0.4", "tenant", "db-0", 4*time.Hour),                          // namespace 720h cut to 3h: released
	)
	b.pass()
	got := b.held()
	if len(got) != 2 || got["10.0.0.2"].IP == "" || got["10.0.0.3"].IP == "" {
		t.Fatalf("kept %v; want 10.0.0.2 and 10.0.0.3", got)
	}
	if n := countOf(b.eventReasons(), "ReservationTimeCapped"); n != 2 {
		t.Fatalf("want a ReservationTimeCapped Event on the StatefulSet and the namespace, got %d", n)
	}
	b.pass()
	if n := countOf(b.eventReasons(), "ReservationTimeCapped"); n != 0 {
		t.Fatal("the same cut was reported again")
	}
}

func TestPassKeepsScaledDownMembersWhenTheSetSaysSo(t *testing.T) {
	kept := annotatedSet("kafka", "broker", "1", "2h")
	kept.Annotations[release.ScaleDownAnnotation] = release.Keep
	typo := annotatedSet("kafka", "zk", "2", "2h")
	typo.Annotations[release.ScaleDownAnnotation] = "yes"
	b := newPassBed(t, kept, typo)
	b.reserve("n1",
		ofSet(held("10.0.0.1", "kafka", "broker-5", time.Minute), "broker", "1"), // scaled down, kept
		ofSet(held("10.0.0.2", "kafka", "broker-6", 3*time.Hour), "broker", "1"), // kept no longer than its 2h
		ofSet(held("10.0.0.3", "kafka", "zk-4", time.Minute), "zk", "2"),         // the typo keeps nothing
	)
	b.pass()
	if got := b.held(); len(got) != 1 || got["10.0.0.1"].IP == "" {
		t.Fatalf("kept %v; want 10.0.0.1 only", got)
	}
	if ev := b.eventReasons(); countOf(ev, "InvalidReservationPolicy") != 1 {
		t.Fatalf("events %v: want one InvalidReservationPolicy", ev)
	}
}

// A StatefulSet that opts in to keeping its members across a re-creation:
// deleted, its members' reservations wait; re-created (another UID), the
// new set is handed them.
func TestPassKeepsMembersAcrossARecreatedSet(t *testing.T) {
	ctx := context.Background()
	old := annotatedSet("kafka", "broker", "old", "2h")
	old.Annotations[release.RecreateAnnotation] = release.Keep
	b := newPassBed(t, old)
	b.reserve("n1", ofSet(held("10.0.0.1", "kafka", "broker-0", time.Minute), "broker", "old"))
	b.pass()
	sets := b.kube.AppsV1().StatefulSets("kafka")
	if err := sets.Delete(ctx, "broker", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the set gone from the cache", func() bool { return len(b.c.caches.sets.GetStore().List()) == 0 })
	b.pass()
	if e, ok := b.held()["10.0.0.1"]; !ok || e.OwnerUID != "sts-old" {
		t.Fatalf("released (or re-owned) while its set is away: %+v", b.held())
	}
	again := annotatedSet("kafka", "broker", "new", "2h") // a Helm reinstall: the same annotations
	again.Annotations[release.RecreateAnnotation] = release.Keep
	if _, err := sets.Create(ctx, again, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the new set in the cache", func() bool { return len(b.c.caches.sets.GetStore().List()) == 1 })
	b.pass()
	if e := b.held()["10.0.0.1"]; e.OwnerUID != "sts-new" {
		t.Fatalf("not handed to the re-created set: %+v", b.held())
	}
}

func TestPassHandsMembersToTheRecreatedSet(t *testing.T) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "zoo", Annotations: map[string]string{release.RecreateAnnotation: release.Keep}}}
	b := newPassBed(t, ns, annotatedSet("zoo", "keeper", "new", "2h"))
	b.reserve("n1", ofSet(held("10.0.0.1", "zoo", "keeper-0", time.Minute), "keeper", "old"), ofSet(held("10.0.0.2", "zoo", "keeper-7", time.Minute), "keeper", "old"))
	b.pass()
	got := b.held()
	if len(got) != 1 || got["10.0.0.1"].OwnerUID != "sts-new" {
		t.Fatalf("held %+v: want keeper-0's, handed to the new set (keeper-7 is past its 3 replicas)", got)
	}
}
