package controller

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/capo-net/capo/pkg/owners"
)

// A cluster-scoped kind is refused at start and by its watch, saying what
// to do; a namespaced one, or one not served yet, is not.
func TestClusterScopedOwnerKindRefused(t *testing.T) {
	kube := fake.NewClientset()
	kube.Resources = []*metav1.APIResourceList{{
		GroupVersion: "example.com/v1",
		APIResources: []metav1.APIResource{{Name: "grids", Kind: "Grid"}, {Name: "brokers", Kind: "Broker", Namespaced: true}},
	}}
	grid := owners.Kind{Group: "example.com", Version: "v1", Kind: "Grid", Resource: "grids"}
	broker := owners.Kind{Group: "example.com", Version: "v1", Kind: "Broker"}
	unserved := owners.Kind{Group: "other.example.com", Version: "v1", Kind: "Pool"}
	ws := newOwnerWatches(OwnerClients{Discovery: kube.Discovery()})
	errs := checkOwnerKinds(ws, []owners.Kind{broker, grid, unserved})
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), "Grid.example.com/v1: grids is cluster-scoped") || !strings.Contains(errs[0].Error(), "remove the entry from ownerKinds") {
		t.Fatalf("at start: %v", errs)
	}
	if _, err := resourceOf(kube.Discovery(), grid); err == nil || !strings.Contains(err.Error(), "cluster-scoped") {
		t.Fatalf("its watch: %v", err)
	}
	if gvr, err := resourceOf(kube.Discovery(), broker); err != nil || gvr.Resource != "brokers" {
		t.Fatalf("a namespaced kind: %v %v", gvr, err)
	}
	if errs := checkOwnerKinds(nil, []owners.Kind{grid}); errs != nil {
		t.Fatalf("no discovery: %v", errs)
	}
}
