package controller

import (
	"errors"
	"reflect"
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
	dynamicfake "k8s.io/client-go/dynamic/fake"
	metadatafake "k8s.io/client-go/metadata/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/capo-net/capo/pkg/config"
	"github.com/capo-net/capo/pkg/owners"
	"github.com/capo-net/capo/pkg/release"
)

// live answers the pass bed's GETs of resource as the API server would
// now, whatever its caches hold; gets counts them.
func (b *passBed) live(resource string, answer func(name string) (runtime.Object, error)) (gets *int) {
	gets = new(int)
	b.kube.PrependReactor("get", resource, func(a k8stesting.Action) (bool, runtime.Object, error) {
		*gets++
		obj, err := answer(a.(k8stesting.GetAction).GetName())
		return true, obj, err
	})
	return gets
}

func mqSet(uid string, replicas int32) *appsv1.StatefulSet {
	return &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: "kafka", Name: "mq", UID: types.UID("sts-" + uid)}, Spec: appsv1.StatefulSetSpec{Replicas: &replicas}}
}

func (b *passBed) heldBack(reason release.Reason, cause string) float64 {
	return testutil.ToFloat64(b.c.metrics.heldBack.WithLabelValues(string(reason), cause))
}

func (b *passBed) released(reason release.Reason) float64 {
	return testutil.ToFloat64(b.c.metrics.releases.WithLabelValues(string(reason)))
}

// The soak's case: the cache says mq has 1 replica, the API server 4 (the
// scale-up never reached the cache). Members 1 and 2's teardowns are not
// released as scaled-down, with one GET of mq per pass for both; once the
// API server says 1 too, they are.
func TestAScaleDownTheAPIServerDoesNotSayIsHeldBack(t *testing.T) {
	b := newPassBed(t, mqSet("1", 1))
	replicas := int32(4)
	gets := b.live("statefulsets", func(string) (runtime.Object, error) { return mqSet("1", replicas), nil })
	b.reserve("n1", ofSet(held("10.0.0.1", "kafka", "mq-1", time.Minute), "mq", "1"), ofSet(held("10.0.0.2", "kafka", "mq-2", time.Minute), "mq", "1"))
	b.pass()
	if got := b.held(); len(got) != 2 {
		t.Fatalf("held %v: the API server's mq has 4 replicas", got)
	}
	if *gets != 1 || b.heldBack(release.ScaledDown, heldDisagrees) != 2 || b.released(release.ScaledDown) != 0 {
		t.Fatalf("gets %d, held back %v, released %v: want one GET for both, both held back", *gets, b.heldBack(release.ScaledDown, heldDisagrees), b.released(release.ScaledDown))
	}
	replicas = 1
	b.pass()
	if got := b.held(); len(got) != 0 || b.released(release.ScaledDown) != 2 {
		t.Fatalf("held %v, released %v: the API server agrees now", got, b.released(release.ScaledDown))
	}
}

// A live read that fails says nothing: the release waits; releases that
// do not depend on it (a ttl release of a pod with no owner, whose pod and
// namespace are read) go on in the same pass.
func TestAReleaseWhoseLiveReadFailsIsHeldBack(t *testing.T) {
	b := newPassBed(t, mqSet("1", 1))
	fail := true
	b.live("statefulsets", func(string) (runtime.Object, error) {
		if fail {
			return nil, apierrors.NewInternalError(errors.New("etcd leader changed"))
		}
		return mqSet("1", 1), nil
	})
	b.reserve("n1", ofSet(held("10.0.0.1", "kafka", "mq-1", time.Minute), "mq", "1"), held("10.0.0.9", "kafka", "old-0", 2*time.Hour))
	b.pass()
	if got := b.held(); len(got) != 1 || got["10.0.0.1"].IP == "" {
		t.Fatalf("held %v: want mq-1's kept (its read failed), old-0's released by ttl", got)
	}
	if b.heldBack(release.ScaledDown, heldReadFailed) != 1 || b.released(release.TTL) != 1 {
		t.Fatalf("held back %v, ttl %v", b.heldBack(release.ScaledDown, heldReadFailed), b.released(release.TTL))
	}
	fail = false
	b.pass()
	if got := b.held(); len(got) != 0 {
		t.Fatalf("held %v after the read healed", got)
	}
}

// NotFound confirms an owner gone; an owner the cache lacks but the API
// server has, of the entry's UID, is not gone.
func TestOwnerGoneIsConfirmedByNotFound(t *testing.T) {
	b := newPassBed(t)
	there := map[string]bool{"web": true}
	b.live("statefulsets", func(name string) (runtime.Object, error) {
		if there[name] {
			s := mqSet("web", 3)
			s.Name = name
			return s, nil
		}
		return nil, apierrors.NewNotFound(schema.GroupResource{Group: "apps", Resource: "statefulsets"}, name)
	})
	b.reserve("n1", ofSet(held("10.0.0.1", "kafka", "web-0", time.Minute), "web", "web"), ofSet(held("10.0.0.2", "kafka", "db-0", time.Minute), "db", "db"))
	b.pass()
	if got := b.held(); len(got) != 1 || got["10.0.0.1"].IP == "" || b.released(release.OwnerGone) != 1 {
		t.Fatalf("held %v, owner-gone %v: want db-0's released (NotFound), web-0's kept (the API server has web)", got, b.released(release.OwnerGone))
	}
	if b.heldBack(release.OwnerGone, heldDisagrees) != 1 {
		t.Fatalf("held back %v", b.heldBack(release.OwnerGone, heldDisagrees))
	}
}

// A namespace the cache lacks is read once for all its entries; the API
// server's says whether it is gone.
func TestNamespaceGoneIsConfirmed(t *testing.T) {
	b := newPassBed(t)
	var live bool
	gets := b.live("namespaces", func(name string) (runtime.Object, error) {
		if !live {
			return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "namespaces"}, name)
		}
		return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, nil
	})
	live = true
	b.reserve("n1", held("10.0.0.1", "shop", "a-0", time.Minute), held("10.0.0.2", "shop", "b-0", time.Minute))
	b.pass()
	if got := b.held(); len(got) != 2 || *gets != 1 || b.heldBack(release.NamespaceGone, heldDisagrees) != 2 {
		t.Fatalf("held %v, gets %d: want both kept on one read of a namespace the API server has", got, *gets)
	}
	live = false
	b.pass()
	if got := b.held(); len(got) != 0 || b.released(release.NamespaceGone) != 2 {
		t.Fatalf("held %v: the namespace is gone", got)
	}
}

// A ReplicaSet whose Deployment the cache lacks is owner-gone only if the
// API server lacks it too.
func TestAReplicaSetsParentIsReadLive(t *testing.T) {
	yes := true
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{
		Namespace: "kafka", Name: "web-7d9", UID: "rs1",
		OwnerReferences: []metav1.OwnerReference{{Kind: "Deployment", Name: "web", UID: "d1", Controller: &yes}},
	}}
	b := newPassBed(t, rs)
	parent := true
	b.live("deployments", func(name string) (runtime.Object, error) {
		if parent {
			return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "kafka", Name: name, UID: "d1"}}, nil
		}
		return nil, apierrors.NewNotFound(schema.GroupResource{Group: "apps", Resource: "deployments"}, name)
	})
	e := held("10.0.0.1", "kafka", "web-7d9-x", time.Minute)
	e.OwnerKind, e.OwnerName, e.OwnerUID = "ReplicaSet", "web-7d9", "rs1"
	b.reserve("n1", e)
	b.pass()
	if _, ok := b.held()["10.0.0.1"]; !ok || b.heldBack(release.OwnerGone, heldDisagrees) != 1 {
		t.Fatal("released as owner-gone though the API server has the ReplicaSet's Deployment")
	}
	parent = false
	b.pass()
	if _, ok := b.held()["10.0.0.1"]; ok {
		t.Fatal("kept though the Deployment is gone")
	}
}

// Owners of the kinds beyond apps/v1 are read through their watch's
// clients: Kruise's set whole (its scale), a listed kind's metadata.
func TestOwnersBeyondAppsV1AreReadLive(t *testing.T) {
	kruiseGVR := schema.GroupVersionResource{Group: "apps.kruise.io", Version: "v1beta1", Resource: "statefulsets"}
	brokerGVR := schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "brokers"}
	broker := owners.Kind{Group: "example.com", Version: "v1", Kind: "Broker"}
	set := kruiseSet(map[string]any{"replicas": int64(4), "reserveOrdinals": []any{int64(1)}}, nil)
	dyn := dynamicfake.NewSimpleDynamicClient(runtime.NewScheme(), set)
	scheme := metadatafake.NewTestScheme()
	_ = metav1.AddMetaToScheme(scheme)
	b := &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "example.com/v1", Kind: "Broker"}, ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "b", UID: "b-1"}}
	meta := metadatafake.NewSimpleMetadataClient(scheme, b)
	ws := &ownerWatches{clients: OwnerClients{Dynamic: dyn, Metadata: meta}, byKey: map[string]*ownerWatch{
		owners.KruiseStatefulSet.Key(): {kind: owners.KruiseStatefulSet, gvr: kruiseGVR},
		broker.Key():                   {kind: broker, gvr: brokerGVR},
	}}
	ctx := t.Context()
	got := ws.readLive(ctx, release.OwnerKey{Kind: owners.KruiseStatefulSet.Key(), Namespace: "ns", Name: "kafka"})
	if got.err != nil || !got.live || got.owner.UID != "ks-1" || got.owner.Replicas != 4 || !got.owner.Reserved[1] {
		t.Fatalf("Kruise's set read live: %+v", got)
	}
	if got := ws.readLive(ctx, release.OwnerKey{Kind: broker.Key(), Namespace: "ns", Name: "b"}); got.err != nil || !got.live || got.owner.UID != "b-1" {
		t.Fatalf("a listed kind's owner read live: %+v", got)
	}
	if got := ws.readLive(ctx, release.OwnerKey{Kind: broker.Key(), Namespace: "ns", Name: "other"}); got.err != nil || got.live {
		t.Fatalf("a listed kind's owner not found: %+v, want gone", got)
	}
	if got := ws.readLive(ctx, release.OwnerKey{Kind: "Broker.other.com", Namespace: "ns", Name: "b"}); got.err == nil {
		t.Fatalf("a kind not watched read as %+v", got)
	}
}

// The live world replaces what was read, and only that; a read that
// failed changes nothing, and a live set without the re-create opt-in
// ends what was remembered of one.
func TestWithLive(t *testing.T) {
	mq := release.OwnerKey{Kind: "StatefulSet", Namespace: "kafka", Name: "mq"}
	web := release.OwnerKey{Kind: "StatefulSet", Namespace: "kafka", Name: "web"}
	w := release.World{
		Namespaces:   map[string]bool{"kafka": true},
		Owners:       map[release.OwnerKey]release.Owner{mq: {UID: "s1", StatefulSet: true, Replicas: 1}, web: {UID: "w1"}},
		RecreateSets: map[release.OwnerKey]bool{mq: true},
	}
	lw := withLive(w, map[liveKey]liveState{
		{owner: mq}:          {live: true, owner: release.Owner{UID: "s1", StatefulSet: true, Replicas: 4}},
		{owner: web}:         {err: errors.New("timeout")},
		{namespace: "kafka"}: {},
	}, policyTTL(config.Default()))
	if lw.Owners[mq].Replicas != 4 || lw.Owners[web].UID != "w1" || lw.Namespaces["kafka"] || lw.RecreateSets[mq] {
		t.Fatalf("live world %+v", lw)
	}
	if w.Owners[mq].Replicas != 1 || !w.Namespaces["kafka"] || !w.RecreateSets[mq] {
		t.Fatalf("the caches' world was changed: %+v", w)
	}
}

// An entry judged an apps/v1 set's with a UID may be a stable kind's
// written before kinds were told apart: that kind's owner of its name is
// read too. A release the live plan makes for another reason is no
// confirmation; nor is one whose read failed, whatever the plan says.
func TestSubjectsAndJudgeLive(t *testing.T) {
	kruise := owners.KruiseStatefulSet.Key()
	w := release.World{StableKinds: map[string]bool{kruise: true}}
	r := release.Release{Entry: ofSet(held("10.0.0.1", "kafka", "mq-2", time.Minute), "mq", "1"), Reason: release.ScaledDown}
	keys := subjects(r, w)
	if len(keys) != 2 || keys[0].owner.Kind != "StatefulSet" || keys[1].owner != (release.OwnerKey{Kind: kruise, Namespace: "kafka", Name: "mq"}) {
		t.Fatalf("subjects %v", keys)
	}
	if ns := subjects(release.Release{Entry: r.Entry, Reason: release.NamespaceGone}, w); len(ns) != 1 || ns[0].String() != "Namespace kafka" {
		t.Fatalf("a namespace-gone release's subjects %v", ns)
	}
	ok := map[liveKey]liveState{keys[0]: {live: true}, keys[1]: {}}
	if _, confirmed := judgeLive(r, keys, ok, release.ScaledDown); !confirmed {
		t.Error("the same reason live is a confirmation")
	}
	if h, confirmed := judgeLive(r, keys, ok, release.OwnerGone); confirmed || h.live != release.OwnerGone || h.err != nil {
		t.Errorf("another reason live: %+v, confirmed %v", h, confirmed)
	}
	failed := map[liveKey]liveState{keys[0]: {live: true}, keys[1]: {err: errors.New("timeout")}}
	if h, confirmed := judgeLive(r, keys, failed, release.ScaledDown); confirmed || h.key != keys[1] || h.err == nil {
		t.Errorf("a failed read: %+v, confirmed %v", h, confirmed)
	}
}

// The soak's early ttl releases: the cache still has a StatefulSet's old
// reservation time (30s), the API server its new one (1h). Its member's
// teardown, a minute old, is not released as due; once the API server
// says 30s too, it is. The member's pod and namespace are read, each
// once; a read that fails holds the release back.
func TestATTLTheAPIServerLengthenedIsHeldBack(t *testing.T) {
	b := newPassBed(t, annotatedSet("kafka", "mq", "1", "30s"))
	ttl, failPods := "1h", false
	sets := b.live("statefulsets", func(string) (runtime.Object, error) {
		return annotatedSet("kafka", "mq", "1", ttl), nil
	})
	pods := b.live("pods", func(name string) (runtime.Object, error) {
		if failPods {
			return nil, apierrors.NewServiceUnavailable("the API server is shutting down")
		}
		return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "pods"}, name)
	})
	b.reserve("n1", ofSet(held("10.0.0.1", "kafka", "mq-1", time.Minute), "mq", "1"), ofSet(held("10.0.0.2", "kafka", "mq-2", time.Minute), "mq", "1"))
	b.pass()
	if got := b.held(); len(got) != 2 || b.heldBack(release.TTL, heldDisagrees) != 2 || b.released(release.TTL) != 0 {
		t.Fatalf("held %v, held back %v: the API server's mq keeps its members' addresses an hour", got, b.heldBack(release.TTL, heldDisagrees))
	}
	if *sets != 1 || *pods != 2 {
		t.Fatalf("%d GETs of mq, %d of pods: want one of mq, one a member", *sets, *pods)
	}
	ttl, failPods = "30s", true
	b.pass()
	if got := b.held(); len(got) != 2 || b.heldBack(release.TTL, heldReadFailed) != 2 {
		t.Fatalf("held %v, held back %v: the members' pods could not be read", got, b.heldBack(release.TTL, heldReadFailed))
	}
	failPods = false
	b.pass()
	if got := b.held(); len(got) != 0 || b.released(release.TTL) != 2 {
		t.Fatalf("held %v, released %v: the API server agrees now", got, b.released(release.TTL))
	}
}

// A pod's or a namespace's reservation time, as the API server has it,
// decides a ttl release as the caches' would: set, cut to
// maxIPReserveTime, gone with its object.
func TestWithLiveTTLs(t *testing.T) {
	cfg := config.Default()
	cfg.MaxIPReserveTime = 2 * time.Hour
	mq := release.OwnerKey{Kind: "StatefulSet", Namespace: "kafka", Name: "mq"}
	w := release.World{TTLs: release.TTLs{Pods: map[string]time.Duration{"kafka/gone-0": time.Minute}, Sets: map[release.OwnerKey]time.Duration{mq: time.Minute}}}
	ann := func(v string) map[string]string { return map[string]string{release.TTLAnnotation: v} }
	lw := withLive(w, map[liveKey]liveState{
		{namespace: "kafka", pod: "mq-0"}:   {live: true, annotations: ann("5h")},
		{namespace: "kafka", pod: "gone-0"}: {},
		{owner: mq}:                         {live: true, annotations: ann("bad")},
		{namespace: "kafka"}:                {live: true, annotations: ann("10m")},
	}, policyTTL(cfg))
	want := release.TTLs{Pods: map[string]time.Duration{"kafka/mq-0": 2 * time.Hour}, Sets: map[release.OwnerKey]time.Duration{}, Namespaces: map[string]time.Duration{"kafka": 10 * time.Minute}}
	if !reflect.DeepEqual(lw.TTLs, want) || lw.Namespaces != nil {
		t.Fatalf("live TTLs %+v, namespaces %v; want %+v, no namespaces judged", lw.TTLs, lw.Namespaces, want)
	}
	if w.TTLs.Sets[mq] != time.Minute || len(w.TTLs.Pods) != 1 {
		t.Fatalf("the caches' world was changed: %+v", w.TTLs)
	}
}
