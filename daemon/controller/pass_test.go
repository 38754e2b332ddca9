package controller

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"

	"github.com/capo-net/capo/pkg/config"
	"github.com/capo-net/capo/pkg/reserve"
	"github.com/capo-net/capo/pkg/reserve/calicostore"
	"github.com/capo-net/capo/pkg/reserve/reservetest"
	"github.com/capo-net/capo/pkg/selection"
)

func TestMatchesManual(t *testing.T) {
	e := reserve.Entry{IP: "10.0.0.2", Namespace: "kafka", Pod: "broker-1"}
	for v, want := range map[string]bool{
		"all":                 true,
		" all ":               true,
		"10.0.0.2":            true,
		"10.0.0.1, 10.0.0.2":  true,
		"10.0.0.20":           false,
		"pod=kafka/broker-1":  true,
		"pod=kafka/broker-10": false,
		"pod=other/broker-1":  false,
		"":                    false,
		"10.0.0.2/32":         true,
		"::ffff:10.0.0.2":     true,
		"10.0.0.0/24":         false,
	} {
		if got := matchesManual(v, e); got != want {
			t.Errorf("%q: %v, want %v", v, got, want)
		}
	}
	e6 := reserve.Entry{IP: "fd00::1"}
	for _, v := range []string{"fd00:0::1", "FD00::1", "fd00::1/128", " fd00:0:0::1 "} {
		if !matchesManual(v, e6) {
			t.Errorf("%q does not match fd00::1", v)
		}
	}
	wide := reserve.Entry{IP: "10.9.0.0/30"} // added by hand
	if !matchesManual("10.9.0.0/30", wide) || matchesManual("10.9.0.0", wide) {
		t.Error("a wider CIDR is released by its own spelling only")
	}
}

var now = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)

// passBed is a leading controller on a fake clientset and the fake store,
// its clock stopped at now (moved by the test through clock: the
// informers' handlers read it too), its Events recorded.
type passBed struct {
	t      *testing.T
	c      *Controller
	kube   *fake.Clientset
	store  *reservetest.Store
	events *record.FakeRecorder
	clock  *clock
}

func newPassBed(t *testing.T, objs ...runtime.Object) *passBed {
	t.Helper()
	for _, ns := range []string{"kafka", "redis"} { // the entries' namespaces live unless a test says otherwise
		objs = append(objs, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	}
	b := &passBed{t: t, kube: fake.NewClientset(objs...), store: reservetest.NewStore(reserve.DefaultLimits), events: record.NewFakeRecorder(100), clock: &clock{t: now}}
	c, err := New(Options{Namespace: "capo-system", LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second},
		b.kube, OwnerClients{}, b.store, &holders{by: map[string][2]string{}})
	if err != nil {
		t.Fatal(err)
	}
	c.recorder, c.now = b.events, b.clock.now
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if !c.caches.start(ctx.Done()) {
		t.Fatal("caches did not sync")
	}
	c.leading.Store(true)
	cfg := config.Default()
	cfg.IPReserveTime = time.Hour
	c.config.Set(cfg)
	b.c = c
	return b
}

func (b *passBed) reserve(node string, es ...reserve.Entry) {
	b.t.Helper()
	if _, err := b.store.Reserve(context.Background(), node, es); err != nil {
		b.t.Fatal(err)
	}
}

func (b *passBed) pass() {
	b.t.Helper()
	if err := b.c.pass(context.Background()); err != nil {
		b.t.Fatalf("pass: %v", err)
	}
}

func (b *passBed) held() map[string]reserve.Entry {
	b.t.Helper()
	l, err := b.store.List(context.Background())
	if err != nil {
		b.t.Fatal(err)
	}
	out := map[string]reserve.Entry{}
	for _, e := range l.Entries {
		out[e.IP] = e
	}
	return out
}

func (b *passBed) eventReasons() []string {
	var out []string
	for {
		select {
		case e := <-b.events.Events:
			out = append(out, strings.Fields(e)[1])
		default:
			return out
		}
	}
}

// held is an entry the controller first saw age ago.
func held(ip, ns, pod string, age time.Duration) reserve.Entry {
	return reserve.Entry{IP: ip, Namespace: ns, Pod: pod, PodUID: "u-" + pod, Reason: reserve.ReasonCNIDel, ReservedAt: now.Add(-age), Seen: now.Add(-age)}
}

// fresh is an entry written since the last pass: not seen yet.
func fresh(ip, ns, pod string, age time.Duration) reserve.Entry {
	e := held(ip, ns, pod, age)
	e.Seen = time.Time{}
	return e
}

// pod is a pod object whose UID is what held records for it.
func pod(ns, name string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("u-" + name)}}
}

func TestPassReleasesWhatIsDueAndStampsTheRest(t *testing.T) {
	set := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: "kafka", Name: "broker", UID: "s1"}}
	b := newPassBed(t, set, pod("kafka", "old-0"))
	gone := held("10.0.0.3", "kafka", "broker-7", time.Minute)
	gone.OwnerKind, gone.OwnerName, gone.OwnerUID = "StatefulSet", "broker", "s0" // replaced since by s1
	// new-0's node clock is two hours slow: its age is the controller's.
	b.reserve("n1", held("10.0.0.1", "kafka", "old-0", 2*time.Hour), fresh("fd00::1", "kafka", "new-0", 2*time.Hour))
	b.reserve("n2", gone)
	b.pass()
	got := b.held()
	if len(got) != 1 || !got["fd00::1"].Seen.Equal(now) {
		t.Fatalf("held after the pass %+v: want fd00::1 alone, stamped with the controller's clock", got)
	}
	if n := testutil.ToFloat64(b.c.metrics.releases.WithLabelValues("ttl")); n != 1 {
		t.Errorf("ttl releases %v", n)
	}
	if n := testutil.ToFloat64(b.c.metrics.releases.WithLabelValues("owner-gone")); n != 1 {
		t.Errorf("owner-gone releases %v", n)
	}
	if ev := b.eventReasons(); !slices.Equal(ev, []string{"IPReservationReleased"}) {
		t.Errorf("events %v: want one, on the pod that still exists", ev)
	}
	b.clock.add(time.Minute)
	b.pass()
	if e := b.held()["fd00::1"]; !e.Seen.Equal(now) {
		t.Fatalf("a second pass moved Seen to %v", e.Seen)
	}
}

func TestPassReleasesByHandAsValues(t *testing.T) {
	req := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "capo-system", Name: DefaultReleaseConfigMap}, Data: map[string]string{"n1": "FD00:0::1"}}
	legacy := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n2", Annotations: map[string]string{LegacyReleaseAnnotation: "all"}}}
	b := newPassBed(t, req, legacy)
	b.reserve("n1", held("fd00::1", "kafka", "a-0", time.Minute), held("fd00::2", "kafka", "b-0", time.Minute))
	b.reserve("n2", held("fd00::1", "kafka", "c-0", time.Minute))
	b.pass()
	got := b.held()
	if _, ok := got["fd00::2"]; !ok || len(got) != 2 {
		t.Fatalf("held %+v: want fd00::2 of n1 and fd00::1 of n2 (whose Node annotation is no longer read)", got)
	}
	if n := testutil.ToFloat64(b.c.metrics.releases.WithLabelValues("manual")); n != 1 {
		t.Errorf("manual releases %v", n)
	}
	after, _ := b.kube.CoreV1().ConfigMaps("capo-system").Get(context.Background(), DefaultReleaseConfigMap, metav1.GetOptions{})
	if _, ok := after.Data["n1"]; ok {
		t.Fatal("the answered request was not removed")
	}
	if ev := b.eventReasons(); !slices.Contains(ev, "ReleaseAnnotationIgnored") {
		t.Errorf("events %v: the Node's old annotation was not called out", ev)
	}
	b.pass()
	if ev := b.eventReasons(); slices.Contains(ev, "ReleaseAnnotationIgnored") {
		t.Errorf("events %v: the old annotation was called out twice", ev)
	}
	if _, err := b.kube.CoreV1().Nodes().Get(context.Background(), "n2", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, a := range b.kube.Actions() {
		if a.GetResource().Resource == "nodes" && a.GetVerb() != "list" && a.GetVerb() != "watch" && a.GetVerb() != "get" {
			t.Errorf("the controller wrote a Node: %s", a.GetVerb())
		}
	}
}

// A request is applied once: its key left in place (its clear refused,
// as when the Role names another ConfigMap), the teardowns after it are
// kept, on this pass and the next, seen or not. Once the key is cleared,
// the same request given again is a new one.
func TestAManualRequestIsAppliedOnce(t *testing.T) {
	req := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "capo-system", Name: DefaultReleaseConfigMap}, Data: map[string]string{"n1": "all"}}
	b := newPassBed(t, req)
	clk := b.clock
	refuse := true
	b.kube.PrependReactor("patch", "configmaps", func(k8stesting.Action) (bool, runtime.Object, error) {
		if refuse {
			return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, DefaultReleaseConfigMap, errors.New("not in resourceNames"))
		}
		return false, nil, nil
	})
	b.reserve("n1", held("10.0.0.1", "kafka", "a-0", time.Minute))
	b.pass()
	if got := b.held(); len(got) != 0 {
		t.Fatalf("held %+v: the request was not answered", got)
	}
	clk.add(time.Minute)
	b.reserve("n1", fresh("10.0.0.2", "kafka", "b-0", 0))
	for range 2 { // written since the request, then seen
		b.pass()
		clk.add(time.Minute)
		if _, ok := b.held()["10.0.0.2"]; !ok {
			t.Fatal("a teardown after the request was released by it")
		}
	}
	if ev := b.eventReasons(); slices.Contains(ev, "ReleaseMatchedNothing") {
		t.Errorf("events %v: an answered request was called unmatched", ev)
	}
	refuse = false
	b.pass() // the key cleared
	waitFor(t, "the cleared key", func() bool {
		return b.c.releaser.releaseConfigMap() != nil && len(b.c.releaser.releaseConfigMap().Data) == 0
	})
	if _, err := b.kube.CoreV1().ConfigMaps("capo-system").Update(context.Background(), req, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the request given again", func() bool { return len(b.c.releaser.releaseConfigMap().Data) == 1 })
	b.pass()
	if got := b.held(); len(got) != 0 {
		t.Fatalf("held %+v: the request given again was not answered", got)
	}
}

// A request first seen long after it was given (its leader away, Calico
// locked, the last leader gone before clearing its key) releases what was
// reserved by the time it was written, not the pod's teardowns since.
func TestARequestReleasesNothingReservedAfterItWasWritten(t *testing.T) {
	asked := metav1.NewTime(now.Add(-30 * time.Second))
	req := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: "capo-system", Name: DefaultReleaseConfigMap, ManagedFields: []metav1.ManagedFieldsEntry{
			{Manager: "kubectl-create", Operation: metav1.ManagedFieldsOperationUpdate, Time: &metav1.Time{Time: now.Add(-time.Hour)}, FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:data":{}}`)}},
			{Manager: "kubectl-patch", Operation: metav1.ManagedFieldsOperationUpdate, Time: &asked, FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:data":{"f:n1":{}}}`)}},
		}},
		Data: map[string]string{"n1": "pod=kafka/a-0"},
	}
	b := newPassBed(t, req)
	b.reserve("n1", held("10.0.0.1", "kafka", "a-0", time.Minute), held("10.0.0.2", "kafka", "a-0", 10*time.Second))
	b.pass()
	releasedOnlyTheFirst(t, b, "written")
}

// Where the API server keeps no record of when a key was written (a
// ConfigMap created empty), the watch bounds it: a request shown by this
// replica's watch while its passes could not run (Calico locked, another
// replica leading) releases nothing reserved after it showed.
func TestARequestReleasesNothingReservedAfterItShowed(t *testing.T) {
	b := newPassBed(t)
	req := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "capo-system", Name: DefaultReleaseConfigMap}, Data: map[string]string{"n1": "pod=kafka/a-0"}}
	b.showRequest(req, request{"n1", "pod=kafka/a-0"})
	b.clock.add(time.Minute)
	later := fresh("10.0.0.2", "kafka", "a-0", 0)
	later.ReservedAt = now.Add(30 * time.Second) // after the request showed, at now
	b.reserve("n1", held("10.0.0.1", "kafka", "a-0", time.Minute), later)
	b.pass()
	releasedOnlyTheFirst(t, b, "showed")
}

// A replica that starts after a request was given, and first shows it
// late, bounds it by when another replica first showed it (the stamp on
// the ConfigMap): a teardown reserved in between is not what it asked for.
func TestARequestReleasesNothingReservedAfterAnotherReplicaSawIt(t *testing.T) {
	b := newPassBed(t)
	b.clock.add(time.Minute) // this replica starts a minute after the request showed elsewhere
	stamps, _ := json.Marshal(map[string]seenStamp{"n1": {Value: "pod=kafka/a-0", Seen: now}})
	meta := metav1.ObjectMeta{Namespace: "capo-system", Name: DefaultReleaseConfigMap, Annotations: map[string]string{ReleaseSeenAnnotation: string(stamps)}}
	req := &corev1.ConfigMap{ObjectMeta: meta, Data: map[string]string{"n1": "pod=kafka/a-0"}}
	b.showRequest(req, request{"n1", "pod=kafka/a-0"})
	later := fresh("10.0.0.2", "kafka", "a-0", 0)
	later.ReservedAt = now.Add(30 * time.Second) // after the stamp, before this replica saw it
	b.reserve("n1", held("10.0.0.1", "kafka", "a-0", time.Minute), later)
	b.pass()
	releasedOnlyTheFirst(t, b, "was stamped seen")
}

// Every replica notes on the release ConfigMap when its watch first showed
// each request; a first stamp stays, and one whose key changed or went
// goes with it.
func TestReplicasStampWhenTheyFirstSawARequest(t *testing.T) {
	ctx := context.Background()
	b := newPassBed(t)
	cms := b.kube.CoreV1().ConfigMaps("capo-system")
	req := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "capo-system", Name: DefaultReleaseConfigMap}, Data: map[string]string{"n1": "pod=kafka/a-0", "n2": "all"}}
	if _, err := cms.Create(ctx, req, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rel := b.c.releaser
	stampsAfter := func(what string, want map[string]seenStamp) {
		t.Helper()
		var got map[string]seenStamp
		waitFor(t, what, func() bool {
			if err := rel.stamp(ctx); err != nil {
				t.Fatal(err)
			}
			cm, err := cms.Get(ctx, DefaultReleaseConfigMap, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			got = seenStamps(cm)
			return len(got) == len(want) && maps.EqualFunc(got, want, func(a, b seenStamp) bool { return a.Value == b.Value && a.Seen.Equal(b.Seen) })
		})
	}
	stampsAfter("both requests stamped", map[string]seenStamp{"n1": {"pod=kafka/a-0", now}, "n2": {"all", now}})

	b.clock.add(time.Minute)
	req.Data = map[string]string{"n1": "pod=kafka/a-0", "n2": "10.0.0.9"}
	if _, err := cms.Update(ctx, req, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	stampsAfter("n2's new request stamped, n1's first stamp kept", map[string]seenStamp{"n1": {"pod=kafka/a-0", now}, "n2": {"10.0.0.9", now.Add(time.Minute)}})

	req.Data = map[string]string{"n2": "10.0.0.9"}
	if _, err := cms.Update(ctx, req, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	stampsAfter("n1's stamp gone with its key", map[string]seenStamp{"n2": {"10.0.0.9", now.Add(time.Minute)}})
}

// showRequest creates the release ConfigMap req and waits until this
// replica's watch has shown r.
func (b *passBed) showRequest(req *corev1.ConfigMap, r request) {
	b.t.Helper()
	if _, err := b.kube.CoreV1().ConfigMaps("capo-system").Create(context.Background(), req, metav1.CreateOptions{}); err != nil {
		b.t.Fatal(err)
	}
	waitFor(b.t, "the request shown", func() bool {
		rel := b.c.releaser
		rel.mu.Lock()
		defer rel.mu.Unlock()
		_, ok := rel.observed[r]
		return ok
	})
}

// releasedOnlyTheFirst: of a-0's two teardowns, the pass released
// 10.0.0.1, the one the request was given for, and kept 10.0.0.2,
// reserved after the request was (when).
func releasedOnlyTheFirst(t *testing.T, b *passBed, when string) {
	t.Helper()
	got := b.held()
	if _, ok := got["10.0.0.1"]; ok {
		t.Fatalf("held %+v: the teardown the request was given for was not released", got)
	}
	if _, ok := got["10.0.0.2"]; !ok {
		t.Fatalf("held %+v: a teardown reserved after the request %s was released by it", got, when)
	}
}

// A request changed after the pass read it is not removed with the answer
// to the old one.
func TestClearManualKeepsAChangedRequest(t *testing.T) {
	req := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "capo-system", Name: DefaultReleaseConfigMap}, Data: map[string]string{"n1": "all", "n2": "10.0.0.9"}}
	b := newPassBed(t, req)
	b.c.releaser.clearManual(context.Background(), []request{{"n1", "10.0.0.1"}, {"n2", "10.0.0.9"}})
	after, _ := b.kube.CoreV1().ConfigMaps("capo-system").Get(context.Background(), DefaultReleaseConfigMap, metav1.GetOptions{})
	if after.Data["n1"] != "all" {
		t.Errorf("the changed request of n1 was removed: %v", after.Data)
	}
	if _, ok := after.Data["n2"]; ok {
		t.Errorf("the answered request of n2 was left: %v", after.Data)
	}
}

// One object that does not decode: the pass goes on everywhere else, says
// so once, and leaves that object as it is.
func TestPassSkipsAnUnreadableObject(t *testing.T) {
	b := newPassBed(t)
	b.reserve("n1", held("10.0.0.1", "kafka", "a-0", 2*time.Hour))
	b.reserve("n2", held("10.0.0.2", "kafka", "b-0", 2*time.Hour))
	broken := calicostore.BucketName(calicostore.BucketOf("n2"), 0)
	o, _ := b.store.Objects.Object(broken)
	o.Annotations[calicostore.MetadataAnnotation] = "v9;?"
	b.store.Objects.Put(o)
	b.pass()
	b.pass()
	if got := b.held(); len(got) != 0 {
		t.Fatalf("held %+v: 10.0.0.1 is due", got)
	}
	if after, _ := b.store.Objects.Object(broken); !slices.Equal(after.CIDRs, o.CIDRs) || after.Annotations[calicostore.MetadataAnnotation] != "v9;?" {
		t.Fatalf("the unreadable object was changed: %+v", after)
	}
	if n := testutil.ToFloat64(b.c.metrics.unreadable); n != 1 {
		t.Errorf("unreadable gauge %v", n)
	}
	if ev := b.eventReasons(); countOf(ev, "UnreadableReservation") != 1 {
		t.Errorf("events %v: want one UnreadableReservation over two passes", ev)
	}
}

func countOf(xs []string, x string) int {
	n := 0
	for _, y := range xs {
		if y == x {
			n++
		}
	}
	return n
}

// The leader moves the per-node layout's objects into buckets.
func TestPassMigratesThePerNodeLayout(t *testing.T) {
	sets := []runtime.Object{ // the testdata's owners
		&appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: "kafka", Name: "broker", UID: "5b1c2d3e-4f50-4a6b-8c7d-9e0f1a2b3c4d"}, Spec: appsv1.StatefulSetSpec{Replicas: ptr(int32(3))}},
		&appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: "redis", Name: "r", UID: "o-r"}, Spec: appsv1.StatefulSetSpec{Replicas: ptr(int32(1))}},
	}
	b := newPassBed(t, sets...)
	cfg := config.Default()
	cfg.IPReserveTime = 10 * 365 * 24 * time.Hour // the testdata's entries are from 2025
	b.c.config.Set(cfg)
	if err := b.store.Objects.PutFiles("../../pkg/reserve/calicostore/internal/layout/testdata/legacy-z1.json", "../../pkg/reserve/calicostore/internal/layout/testdata/legacy-v1-s1.json"); err != nil {
		t.Fatal(err)
	}
	b.pass()
	for _, name := range b.store.Objects.Names() {
		if strings.HasPrefix(name, "capo-") {
			t.Fatalf("%s left after the pass", name)
		}
	}
	if got := b.held(); len(got) != 4 || got["10.77.1.1"].Pod != "r-0" {
		t.Fatalf("held %+v", got)
	}
	if n := testutil.ToFloat64(b.c.metrics.migrated); n != 4 {
		t.Errorf("migrated %v", n)
	}
}

// A pod deleted from a lost node is reserved by the leader, as node-lost.
func TestLostNodesPodIsReserved(t *testing.T) {
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "n1", Annotations: map[string]string{selection.NodeAnnotation: selection.Enabled}},
		Status:     corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionUnknown}}},
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "zk", Labels: map[string]string{selection.NamespaceLabel: selection.Enabled}}}
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "zk", Name: "zk-0", UID: "u", Labels: map[string]string{"statefulset.kubernetes.io/pod-name": "zk-0"}},
		Spec:       corev1.PodSpec{NodeName: "n1"}, Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.7", PodIPs: []corev1.PodIP{{IP: "10.0.0.7"}}},
	}
	b := newPassBed(t, node, ns, p)
	b.c.ipam.(*holders).set("10.0.0.7", "zk", "zk-0")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go b.c.coverer.runLost(ctx)
	if err := b.kube.CoreV1().Pods("zk").Delete(ctx, "zk-0", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the lost pod's reservation", func() bool { return b.held()["10.0.0.7"].Reason == reserve.ReasonNodeLost })
	if e := b.held()["10.0.0.7"]; e.Node != "n1" || e.Pod != "zk-0" || e.PodUID != "u" {
		t.Fatalf("reserved %+v", e)
	}
}

func ptr[T any](v T) *T { return &v }

// An agent's hold of a running pod's address while calico-node is
// replaced is no teardown's: it does not count towards ipReserveMaxCount
// (where it would end an older teardown's reservation) nor end by TTL;
// once its pod has gone it is judged as any other.
func TestHoldsOfRunningPodsAreNotJudged(t *testing.T) {
	b := newPassBed(t, pod("kafka", "db-0"))
	cfg := b.c.config.Get()
	cfg.IPReserveMaxCount = 1
	b.c.config.Set(cfg)
	hold := held("10.0.0.1", "kafka", "db-0", 2*time.Hour)
	hold.Reason = reserve.ReasonCNIRewrite
	gone := held("10.0.0.2", "kafka", "db-1", 2*time.Hour) // its pod gone: judged
	gone.Reason = reserve.ReasonCNIRewrite
	b.reserve("n1", held("10.0.0.3", "kafka", "old-0", 30*time.Minute), hold, gone)
	b.pass()
	got := b.held()
	if _, ok := got["10.0.0.1"]; !ok || len(got) != 2 {
		t.Fatalf("held after the pass %v: want the running pod's hold and old-0's teardown (max count 1, the hold not counted)", got)
	}
	if n := testutil.ToFloat64(b.c.metrics.releases.WithLabelValues("ttl")); n != 1 {
		t.Errorf("ttl releases %v, want db-1's", n)
	}
}
