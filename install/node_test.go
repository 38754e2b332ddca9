package install

import (
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/capo-net/capo/pkg/calico/apigroup"
	"github.com/capo-net/capo/pkg/selection"
)

func TestCheckNodeListsFixedAddressPodsOnlyWhenInstalled(t *testing.T) {
	o := node(t)
	pod := func(name, nodeName string, ann map[string]string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "db", Name: name, Annotations: ann}, Spec: corev1.PodSpec{NodeName: nodeName}}
	}
	kube := fake.NewClientset(
		pod("fixed", "w1", map[string]string{selection.AnnotationIPAddrs: `["10.0.0.9"]`}),
		pod("plain", "w1", nil),
		pod("elsewhere", "w2", map[string]string{selection.AnnotationIPAddrsNoIPAM: `["10.0.0.8"]`}),
	)
	serve(kube, apigroup.GroupV1)
	newKube := func() (kubernetes.Interface, error) { return kube, nil }

	rep, err := CheckNode(o, "w1", newKube)
	if err != nil || rep.Problem != "" || len(rep.FixedAddressPods) != 1 {
		t.Fatalf("before install: %+v %v", rep, err)
	}
	if _, err := Install(o); err != nil {
		t.Fatal(err)
	}
	rep, err = CheckNode(o, "w1", newKube)
	if err != nil || rep.Problem == "" || len(rep.FixedAddressPods) != 1 || rep.FixedAddressPods[0] != "db/fixed ("+selection.AnnotationIPAddrs+")" {
		t.Fatalf("installed: %+v %v", rep, err)
	}
	rep, err = CheckNode(o, "w1", func() (kubernetes.Interface, error) { return nil, errors.New("no credentials") })
	if err != nil || rep.FixedAddressPodsNotChecked != "no credentials" {
		t.Fatalf("unreachable API: %+v %v", rep, err)
	}
}
