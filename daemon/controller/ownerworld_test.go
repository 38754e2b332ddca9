package controller

import (
	"errors"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/capo-net/capo/pkg/owners"
	"github.com/capo-net/capo/pkg/release"
	"github.com/capo-net/capo/pkg/reserve"
)

func kruiseSet(spec map[string]any, ann map[string]string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apps.kruise.io/v1beta1", "kind": "StatefulSet",
		"metadata": map[string]any{"name": "kafka", "namespace": "ns", "uid": "ks-1", "managedFields": []any{map[string]any{"manager": "x"}}},
		"spec":     spec,
		"status":   map[string]any{"replicas": int64(9)},
	}}
	u.SetAnnotations(ann)
	return u
}

func TestKruiseOwnerReadsItsScale(t *testing.T) {
	tmpl := map[string]any{"metadata": map[string]any{"labels": map[string]any{"app": "kafka"}}}
	for _, c := range []struct {
		name string
		spec map[string]any
		ann  map[string]string
		want release.Owner
	}{
		{"defaults", map[string]any{"template": tmpl}, nil, release.Owner{UID: "ks-1", StatefulSet: true, Replicas: 1, Reserved: map[int]bool{}}},
		{
			"replicas, start, reserved",
			map[string]any{"replicas": int64(3), "ordinals": map[string]any{"start": int64(2)}, "reserveOrdinals": []any{int64(3), "5-6"}, "template": tmpl},
			map[string]string{release.ScaleDownAnnotation: release.Keep},
			release.Owner{UID: "ks-1", StatefulSet: true, Replicas: 3, OrdinalStart: 2, Reserved: map[int]bool{3: true, 5: true, 6: true}, KeepScaledDown: true},
		},
		{"reserveOrdinals unreadable: never scaled down", map[string]any{"replicas": int64(3), "reserveOrdinals": []any{"x"}}, nil, release.Owner{UID: "ks-1", Replicas: 3}},
	} {
		t.Run(c.name, func(t *testing.T) {
			trimmed, err := trimKruiseSet(kruiseSet(c.spec, c.ann))
			if err != nil {
				t.Fatal(err)
			}
			u := trimmed.(*unstructured.Unstructured)
			if _, found, _ := unstructured.NestedFieldNoCopy(u.Object, "spec", "template"); found {
				t.Errorf("trimmed set keeps its template")
			}
			if _, found := u.Object["status"]; found || u.GetManagedFields() != nil {
				t.Errorf("trimmed set keeps its status or managed fields: %v", u.Object)
			}
			got := kruiseOwner(u)
			if got.UID != c.want.UID || got.StatefulSet != c.want.StatefulSet || got.Replicas != c.want.Replicas ||
				got.OrdinalStart != c.want.OrdinalStart || got.KeepScaledDown != c.want.KeepScaledDown || len(got.Reserved) != len(c.want.Reserved) {
				t.Fatalf("owner %+v, want %+v", got, c.want)
			}
			for n := range c.want.Reserved {
				if !got.Reserved[n] {
					t.Errorf("ordinal %d not reserved in %v", n, got.Reserved)
				}
			}
		})
	}
}

// A kind not served is not watched, and says why; a served one is found
// by its kind, its subresources aside.
func TestResourceOf(t *testing.T) {
	kube := fake.NewClientset()
	kube.Resources = []*metav1.APIResourceList{{
		GroupVersion: "apps.kruise.io/v1beta1",
		APIResources: []metav1.APIResource{{Name: "statefulsets/status", Kind: "StatefulSet"}, {Name: "statefulsets", Kind: "StatefulSet", Namespaced: true}},
	}}
	gvr, err := resourceOf(kube.Discovery(), owners.KruiseStatefulSet)
	if err != nil || gvr.Resource != "statefulsets" || gvr.Group != "apps.kruise.io" {
		t.Fatalf("resourceOf(kruise) = %v, %v", gvr, err)
	}
	if _, err := resourceOf(kube.Discovery(), owners.Kind{Group: "example.com", Version: "v1", Kind: "Broker"}); err == nil {
		t.Fatal("a kind not served was found")
	}
	if _, err := resourceOf(kube.Discovery(), owners.Kind{Group: "apps.kruise.io", Version: "v1beta1", Kind: "Broker"}); err == nil {
		t.Fatal("a kind its group does not serve was found")
	}
	ws := newOwnerWatches(OwnerClients{Discovery: fake.NewClientset().Discovery()})
	ws.sync([]owners.Kind{{Group: "example.com", Version: "v1", Kind: "Broker"}}, time.Now())
	w := release.World{TrackedKinds: map[string]bool{}, Owners: map[release.OwnerKey]release.Owner{}}
	unwatched := ws.addTo(&w)
	for _, key := range []string{"Broker.example.com", "StatefulSet.apps.kruise.io"} {
		if u, ok := unwatched[key]; !ok || u.why == "" || w.TrackedKinds[key] {
			t.Fatalf("an unserved kind %s: unwatched %v, tracked %v", key, unwatched, w.TrackedKinds)
		}
	}
}

// A served kind capo may not list (no RBAC) is not watched, and says so.
// (A listed kind's metadata informer is proven on a real API server: the
// e2e TestListedOwnerKindMembersKeepTheirAddresses.)
func TestOwnerWatchDenied(t *testing.T) {
	kruiseGVR := schema.GroupVersionResource{Group: "apps.kruise.io", Version: "v1beta1", Resource: "statefulsets"}
	kube := fake.NewClientset()
	kube.Resources = []*metav1.APIResourceList{
		{GroupVersion: "apps.kruise.io/v1beta1", APIResources: []metav1.APIResource{{Name: "statefulsets", Kind: "StatefulSet", Namespaced: true}}},
	}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{kruiseGVR: "StatefulSetList"})
	dyn.PrependReactor("list", "statefulsets", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(kruiseGVR.GroupResource(), "", errors.New("no RBAC"))
	})
	ws := newOwnerWatches(OwnerClients{Discovery: kube.Discovery(), Dynamic: dyn})
	defer ws.closeAll()
	ws.sync(nil, time.Now())
	deadline := time.Now().Add(10 * time.Second)
	for {
		w := release.World{TrackedKinds: map[string]bool{}, Owners: map[release.OwnerKey]release.Owner{}}
		unwatched := ws.addTo(&w)
		if strings.Contains(unwatched["StatefulSet.apps.kruise.io"].why, "forbidden") && !w.TrackedKinds["StatefulSet.apps.kruise.io"] {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("unwatched %v, tracked %v", unwatched, w.TrackedKinds)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// An entry written before owner kinds were told apart by group (kind
// "StatefulSet", a Kruise set's UID) is never judged owner-gone while
// Kruise's watch does not serve: not listed yet, forbidden, not served.
// Only its time ends it then.
func TestOldEntryKeptWhileKruiseWatchIsNotServing(t *testing.T) {
	kruiseGVR := schema.GroupVersionResource{Group: "apps.kruise.io", Version: "v1beta1", Resource: "statefulsets"}
	served := []*metav1.APIResourceList{{GroupVersion: "apps.kruise.io/v1beta1", APIResources: []metav1.APIResource{{Name: "statefulsets", Kind: "StatefulSet", Namespaced: true}}}}
	listing := make(chan struct{})
	defer close(listing)
	for _, tc := range []struct {
		name   string
		served []*metav1.APIResourceList
		list   clienttesting.ReactionFunc
	}{
		// Its CRD is there, v1beta1 not served (v1alpha1 is): its sets may
		// exist, unseen.
		{"not served", []*metav1.APIResourceList{{GroupVersion: "apps.kruise.io/v1alpha1", APIResources: []metav1.APIResource{{Name: "statefulsets", Kind: "StatefulSet", Namespaced: true}}}}, nil},
		{"forbidden", served, func(clienttesting.Action) (bool, runtime.Object, error) {
			return true, nil, apierrors.NewForbidden(kruiseGVR.GroupResource(), "", errors.New("no RBAC"))
		}},
		{"not listed yet", served, func(clienttesting.Action) (bool, runtime.Object, error) {
			<-listing // the API server has not answered the first list
			return true, nil, errors.New("gone")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kube := fake.NewClientset()
			kube.Resources = tc.served
			dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{kruiseGVR: "StatefulSetList"})
			if tc.list != nil {
				dyn.PrependReactor("list", "statefulsets", tc.list)
			}
			ws := newOwnerWatches(OwnerClients{Discovery: kube.Discovery(), Dynamic: dyn})
			defer ws.closeAll()
			ws.sync(nil, time.Now())
			start := time.Now()
			ws.waitListed(3 * time.Second)
			if waited := time.Since(start); tc.name == "forbidden" && waited > 2500*time.Millisecond {
				t.Errorf("waited %s for a forbidden watch to list", waited)
			}
			old := reserve.Entry{IP: "10.0.0.1", Namespace: "ns", Pod: "kafka-1", Seen: time.Now(), OwnerKind: "StatefulSet", OwnerName: "kafka", OwnerUID: "ks-1"}
			for range 20 { // the forbidden list is seen on the watch's first tries
				w := release.World{TrackedKinds: map[string]bool{"StatefulSet": true}, Owners: map[release.OwnerKey]release.Owner{}}
				ws.addTo(&w)
				if !w.UnwatchedKinds[owners.KruiseStatefulSet.Key()] {
					t.Fatalf("Kruise's kind not marked unwatched: %v", w.UnwatchedKinds)
				}
				if plan := release.Plan([]reserve.Entry{old}, time.Now(), release.Limits{TTL: time.Hour, MaxCount: 10}, w); len(plan) != 0 {
					t.Fatalf("released %+v while Kruise's watch is %s", plan, tc.name)
				}
				time.Sleep(20 * time.Millisecond)
			}
		})
	}
}

// Kruise not installed (its group served in no version), as in most
// clusters: no Kruise set exists, so an older entry of a kind named
// StatefulSet is judged as the apps/v1 set's it is, and released when
// that set is gone; an entry of Kruise's own kind is judged by its time
// only.
func TestOldEntryJudgedWhereKruiseIsNotInstalled(t *testing.T) {
	kube := fake.NewClientset()
	ws := newOwnerWatches(OwnerClients{Discovery: kube.Discovery()})
	defer ws.closeAll()
	ws.sync(nil, time.Now())
	ws.waitListed(time.Second)
	now := time.Now()
	old := reserve.Entry{IP: "10.0.0.1", Namespace: "ns", Pod: "web-1", Seen: now, OwnerKind: "StatefulSet", OwnerName: "web", OwnerUID: "gone-1"}
	kruise := reserve.Entry{IP: "10.0.0.2", Namespace: "ns", Pod: "kafka-1", Seen: now, OwnerKind: owners.KruiseStatefulSet.Key(), OwnerName: "kafka", OwnerUID: "ks-1"}
	w := release.World{TrackedKinds: map[string]bool{"StatefulSet": true}, Owners: map[release.OwnerKey]release.Owner{}}
	if unwatched := ws.addTo(&w); unwatched[owners.KruiseStatefulSet.Key()].why == "" || len(w.UnwatchedKinds) != 0 {
		t.Fatalf("a kind not installed: reported %v (want it said), judged as unwatched %v (want not)", unwatched, w.UnwatchedKinds)
	}
	plan := release.Plan([]reserve.Entry{old, kruise}, now, release.Limits{TTL: time.Hour, MaxCount: 10}, w)
	if len(plan) != 1 || plan[0].IP != old.IP || plan[0].Reason != release.OwnerGone {
		t.Fatalf("plan %+v, want only %s released as owner-gone", plan, old.IP)
	}
}
