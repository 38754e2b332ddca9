package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/capo-net/capo/pkg/reserve"
	"github.com/capo-net/capo/test/testbed"
)

// An entry written before capo told owner kinds apart by group names an
// Advanced StatefulSet member's owner "StatefulSet" (no apps/v1 set of
// that name exists). While Kruise's StatefulSet is not served, or capo may
// not list it, no owner of that entry is known: it stays held, never
// released as owner-gone. Once the watch serves, the set is found by the
// UID the entry recorded, and the entry still stays.
func TestOldEntryOfAKruiseMemberHeldWhileKruiseIsNotWatched(t *testing.T) {
	ctx := context.Background()
	if err := bed.ApplyKruiseCRD(ctx); err != nil {
		t.Fatal(err)
	}
	env := bed.NewEnv(t, testbed.Kubernetes, testbed.EnvOptions{PoolPrefix: 29, OptIn: true})
	env.SetConfig(configWith("ipReserveTime: 1h\n"))
	kafka := env.CreateKruiseSet("kafka", 3)
	k := env.AddPods("kafka", 1, env.Conflist(testbed.Capo), testbed.KruiseOwnedBy(kafka))
	evict(t, env, k[0])
	ip := k[0].IP()
	asWrittenBefore(t, env, ip)

	kept := func(c *testbed.Controller, while string) {
		t.Helper()
		eventually(t, 20*time.Second, "the controller leads", c.Leading)
		c.WaitMetricAtLeast(3, "capo_controller_release_pass_duration_seconds_count")
		if !held(env, ip) || c.Metric("capo_controller_releases_total") != 0 {
			t.Fatalf("kafka-0's %s released while %s", ip, while)
		}
		c.Stop()
	}
	servedKruise(t, false)
	kept(env.StartController("not-served"), "Kruise's StatefulSet is not served")
	servedKruise(t, true)
	kept(env.StartControllerWith("no-rbac", testbed.AgentOptions{Kubeconfig: withoutKruise(t, env)}), "capo may not list Kruise's StatefulSet")
	kept(env.StartController("watched"), "its set, found by its UID, exists")
}

// asWrittenBefore rewrites ip's entry as capo wrote it before it told owner
// kinds apart by group: the kind alone.
func asWrittenBefore(t *testing.T, env *testbed.Env, ip string) {
	t.Helper()
	ctx := context.Background()
	e := env.Reservations()[ip]
	if e.OwnerKind != "StatefulSet.apps.kruise.io" {
		t.Fatalf("%s's entry names owner kind %q", ip, e.OwnerKind)
	}
	s := env.ReservationStore()
	if _, err := s.Release(ctx, []reserve.Ref{e.Ref()}); err != nil {
		t.Fatal(err)
	}
	e.OwnerKind = "StatefulSet"
	if _, err := s.Reserve(ctx, e.Node, []reserve.Entry{e}); err != nil {
		t.Fatal(err)
	}
	if got := env.Reservations()[ip].OwnerKind; got != "StatefulSet" {
		t.Fatalf("rewritten entry names owner kind %q", got)
	}
}

// servedKruise serves Kruise's v1beta1 or stops serving it (its objects
// stay, v1alpha1 is still served), and waits for discovery to agree. The
// CRD is the bed's: it is served again when the test ends.
func servedKruise(t *testing.T, served bool) {
	t.Helper()
	ctx := context.Background()
	dyn, err := dynamic.NewForConfig(bed.REST)
	if err != nil {
		t.Fatal(err)
	}
	crds := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	set := func(on bool) error {
		patch := fmt.Appendf(nil, `[{"op":"test","path":"/spec/versions/1/name","value":"v1beta1"},{"op":"replace","path":"/spec/versions/1/served","value":%t}]`, on)
		_, err := dyn.Resource(crds).Patch(ctx, "statefulsets.apps.kruise.io", types.JSONPatchType, patch, metav1.PatchOptions{})
		return err
	}
	if err := set(served); err != nil {
		t.Fatal(err)
	}
	if !served {
		t.Cleanup(func() { _ = set(true) })
	}
	eventually(t, 20*time.Second, "discovery to follow Kruise's v1beta1", func() bool {
		_, err := bed.Kube.Discovery().ServerResourcesForGroupVersion("apps.kruise.io/v1beta1")
		return (err == nil) == served
	})
}

// withoutKruise is a kubeconfig for a service account that may do all a
// capo-controller does but list or watch Kruise's StatefulSets.
func withoutKruise(t *testing.T, env *testbed.Env) string {
	t.Helper()
	ctx := context.Background()
	name := "capo-nokruise-" + env.ID
	if _, err := bed.Kube.CoreV1().ServiceAccounts(env.Namespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	all := []string{"*"}
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: []rbacv1.PolicyRule{{
		APIGroups: []string{"", "apps", "coordination.k8s.io", "events.k8s.io", "crd.projectcalico.org", "projectcalico.org"},
		Resources: all, Verbs: all,
	}}}
	if _, err := bed.Kube.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: env.Namespace}},
	}
	if _, err := bed.Kube.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = bed.Kube.RbacV1().ClusterRoleBindings().Delete(ctx, name, metav1.DeleteOptions{})
		_ = bed.Kube.RbacV1().ClusterRoles().Delete(ctx, name, metav1.DeleteOptions{})
	})
	kc, err := bed.ServiceAccountKubeconfig(ctx, env.Namespace, name)
	if err != nil {
		t.Fatal(err)
	}
	return kc
}
