package cnichain

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	metadatafake "k8s.io/client-go/metadata/fake"
	k8stesting "k8s.io/client-go/testing"
)

func agentPodAndSet() (*corev1.Pod, *appsv1.DaemonSet) {
	yes := true
	ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: "capo-system", Name: "capo-agent", UID: "ds-1"}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
		Namespace: "capo-system", Name: "capo-agent-x1",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "capo-agent", UID: "ds-1", Controller: &yes}},
	}}
	return pod, ds
}

// metaOf is a metadata client holding the DaemonSet, as the agent's
// watch sees it.
func metaOf(ds *appsv1.DaemonSet) *metadatafake.FakeMetadataClient {
	m := &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "DaemonSet"}, ObjectMeta: ds.ObjectMeta}
	return metadatafake.NewSimpleMetadataClient(metaScheme(), m)
}

func metaScheme() *runtime.Scheme {
	s := metadatafake.NewTestScheme()
	_ = metav1.AddMetaToScheme(s)
	return s
}

// The agent learns its DaemonSet's deletion from its watch, so a later
// refusal of every request (kubectl delete -f took the RBAC first) does not
// hide it.
func TestRemovalSeenByTheWatchSurvivesLostRBAC(t *testing.T) {
	pod, ds := agentPodAndSet()
	kube, meta := fake.NewClientset(pod, ds), metaOf(ds)
	r := NewRemoval(kube, meta, pod.Namespace, pod.Name, 0)
	r.grace = 100 * time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go r.Watch(ctx)
	if going, why := r.removing(ctx); going {
		t.Fatalf("the DaemonSet stands, but removing says %q", why)
	}
	time.Sleep(200 * time.Millisecond) // the watch is open
	if err := kube.AppsV1().DaemonSets(ds.Namespace).Delete(ctx, ds.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := meta.Resource(appsv1.SchemeGroupVersion.WithResource("daemonsets")).Namespace(ds.Namespace).Delete(ctx, ds.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// From now on the API refuses with "not found"-free errors we must not rely on.
	kube.PrependReactor("*", "*", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("connection refused")
	})
	deadline := time.Now().Add(5 * time.Second)
	for {
		going, why := r.removing(ctx)
		if going && strings.Contains(why, "deleted") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the deletion the watch delivered was not remembered: %v %q", going, why)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestRemovalAtExitFromOneLiveRead(t *testing.T) {
	gr := schema.GroupResource{Group: "apps", Resource: "daemonsets"}
	cases := map[string]struct {
		err   error
		going bool
	}{
		"deleted":             {apierrors.NewNotFound(gr, "capo-agent"), true},
		"RBAC deleted":        {apierrors.NewForbidden(gr, "capo-agent", errors.New("no role")), true},
		"token invalid":       {apierrors.NewUnauthorized("token revoked"), true},
		"API server away":     {errors.New("dial tcp: connection refused"), false},
		"standing (rollover)": {nil, false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			pod, ds := agentPodAndSet()
			kube := fake.NewClientset(pod, ds)
			r := NewRemoval(kube, metaOf(ds), pod.Namespace, pod.Name, 0)
			r.grace = 100 * time.Millisecond
			if err := r.resolveOwner(context.Background()); err != nil {
				t.Fatal(err)
			}
			if tc.err != nil {
				kube.PrependReactor("get", "daemonsets", func(k8stesting.Action) (bool, runtime.Object, error) { return true, nil, tc.err })
			}
			if going, why := r.removing(context.Background()); going != tc.going {
				t.Fatalf("removing = %v (%s), want %v", going, why, tc.going)
			}
		})
	}
}

func TestRemovalNeverForAgentsOutsideADaemonSet(t *testing.T) {
	kube := fake.NewClientset(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "debug"}})
	for _, name := range []string{"", "debug"} {
		r := NewRemoval(kube, metadatafake.NewSimpleMetadataClient(metaScheme()), "ns", name, 0)
		if going, why := r.removing(context.Background()); going {
			t.Fatalf("pod %q: removing says %q", name, why)
		}
	}
}
