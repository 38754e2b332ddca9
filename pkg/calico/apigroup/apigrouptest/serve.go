// Package apigrouptest helps the unit tests of Calico's API group: a fake
// discovery that serves Calico's types.
package apigrouptest

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/capo-net/capo/pkg/calico/apigroup"
)

// ServeV1 makes kube's discovery serve Calico's v1 types and has the test
// process decide the group (v1) if it has not yet.
func ServeV1(t *testing.T, kube *fake.Clientset) {
	t.Helper()
	rl := &metav1.APIResourceList{GroupVersion: apigroup.GroupV1}
	for _, k := range apigroup.All {
		rl.APIResources = append(rl.APIResources, metav1.APIResource{Name: k.V1})
	}
	kube.Resources = append(kube.Resources, rl)
	if m, err := apigroup.DecideOnce(context.Background(), false, "", kube.Discovery()); err != nil || m.Group != apigroup.GroupV1 {
		t.Fatalf("deciding the group: %+v %v", m, err)
	}
}
