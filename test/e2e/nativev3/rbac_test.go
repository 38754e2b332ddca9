package nativev3

import (
	"context"
	"strings"
	"testing"
	"time"

	apiv3 "github.com/projectcalico/api/pkg/apis/projectcalico/v3"
	calicoset "github.com/projectcalico/api/pkg/client/clientset_generated/clientset"
	authzv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/capo-net/capo/deploy"
	"github.com/capo-net/capo/pkg/calico/client"
	"github.com/capo-net/capo/pkg/reserve"
	"github.com/capo-net/capo/pkg/reserve/calicostore"
)

// applyChartRBAC applies the chart's roles, bindings, accounts and
// admission policy into a new namespace and returns it.
func applyChartRBAC(t *testing.T, ns string) {
	t.Helper()
	ctx := context.Background()
	if _, err := bed.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	out, err := deploy.Render("capo", ns, nil, deploy.ManifestAPIVersions...)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := deploy.Objects(out)
	if err != nil {
		t.Fatal(err)
	}
	var rbac []*unstructured.Unstructured
	for _, o := range objs {
		switch o.GetKind() {
		case "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding":
			rbac = append(rbac, o)
		}
	}
	for _, err := range bed.Apply(ctx, rbac, false) {
		t.Fatal(err)
	}
}

func allowed(t *testing.T, user, group, resource, verb string) bool {
	t.Helper()
	sar := &authzv1.SubjectAccessReview{Spec: authzv1.SubjectAccessReviewSpec{
		User: user, Groups: []string{"system:serviceaccounts", "system:authenticated"},
		ResourceAttributes: &authzv1.ResourceAttributes{Group: group, Resource: resource, Verb: verb},
	}}
	got, err := bed.Kube.AuthorizationV1().SubjectAccessReviews().Create(context.Background(), sar, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return got.Status.Allowed
}

// The chart's roles give capo's accounts in projectcalico.org exactly what
// they have in crd.projectcalico.org, and nothing else; the agent's token
// reserves and releases through capo's v3 store; the admission policy keeps
// an operator's own v3 IPReservation out of its reach.
func TestChartRBACCoversNativeV3(t *testing.T) {
	ns := "capo-rbac-v3"
	applyChartRBAC(t, ns)
	agent := "system:serviceaccount:" + ns + ":capo-agent"
	ctrl := "system:serviceaccount:" + ns + ":capo-controller"
	for _, g := range []string{"crd.projectcalico.org", "projectcalico.org"} {
		for _, c := range []struct {
			user, resource, verb string
			want                 bool
		}{
			{agent, "ipreservations", "create", true},
			{agent, "ipreservations", "delete", true},
			{agent, "ipamhandles", "get", true},
			{agent, "ipamblocks", "list", true},
			{agent, "ipamblocks", "update", false},
			{agent, "ippools", "create", false},
			{agent, "networkpolicies", "get", false},
			{agent, "ipreservations", "watch", false},
			{ctrl, "ipreservations", "update", true},
			{ctrl, "ippools", "list", true},
			{ctrl, "ipamhandles", "delete", false},
			{ctrl, "globalnetworkpolicies", "list", false},
		} {
			if got := allowed(t, c.user, g, c.resource, c.verb); got != c.want {
				t.Errorf("%s %s %s.%s: allowed %v, want %v", c.user, c.verb, c.resource, g, got, c.want)
			}
		}
	}

	ctx := context.Background()
	kc, err := bed.ServiceAccountKubeconfig(ctx, ns, "capo-agent")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kc)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := client.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s := calicostore.NewOn(objs, reserve.DefaultLimits)
	node := "node-rbac-v3"
	if _, err := s.Reserve(ctx, node, []reserve.Entry{entry("10.251.0.1", time.Now().UTC().Truncate(time.Second))}); err != nil {
		t.Fatalf("reserve under the chart's agent role: %v", err)
	}
	if got, err := s.Release(ctx, []reserve.Ref{{Node: node, IP: "10.251.0.1"}}); err != nil || len(got) != 1 {
		t.Fatalf("release under the chart's agent role: %v %v", got, err)
	}

	// An operator's own reservation: capo's account may not change it.
	cs, err := bed.CalicoV3()
	if err != nil {
		t.Fatal(err)
	}
	op := apiv3.NewIPReservation()
	op.Name = "operators-v3"
	op.Spec.ReservedCIDRs = []string{"10.252.0.1/32"}
	if _, err := cs.ProjectcalicoV3().IPReservations().Create(ctx, op, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.ProjectcalicoV3().IPReservations().Delete(ctx, op.Name, metav1.DeleteOptions{}) })
	asAgent, err := calicoset.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dry := []string{metav1.DryRunAll}
	eventually(t, 20*time.Second, "the chart's policy refusing the agent a delete of an operator's v3 IPReservation", func() bool {
		err := asAgent.ProjectcalicoV3().IPReservations().Delete(ctx, op.Name, metav1.DeleteOptions{DryRun: dry})
		return apierrors.IsForbidden(err) && strings.Contains(err.Error(), "never an operator's")
	})
	unlabelled := apiv3.NewIPReservation()
	unlabelled.Name = "not-capos"
	unlabelled.Spec.ReservedCIDRs = []string{"10.252.0.2/32"}
	if _, err := asAgent.ProjectcalicoV3().IPReservations().Create(ctx, unlabelled, metav1.CreateOptions{DryRun: dry}); !apierrors.IsForbidden(err) {
		t.Fatalf("creating an IPReservation not labelled capo's: %v, want forbidden", err)
	}
}
