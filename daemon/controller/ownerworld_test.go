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
