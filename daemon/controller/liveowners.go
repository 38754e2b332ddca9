package controller

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/capo-net/capo/pkg/owners"
	"github.com/capo-net/capo/pkg/release"
)

// liveKey is what a release judged by the caches depends on: a namespace
// (owner and pod empty), a pod, or an owner.
type liveKey struct {
	namespace string
	pod       string
	owner     release.OwnerKey
}

func (k liveKey) String() string {
	if k.pod != "" {
		return "Pod " + k.namespace + "/" + k.pod
	}
	if k.owner == (release.OwnerKey{}) {
		return "Namespace " + k.namespace
	}
	return k.owner.Kind + " " + k.owner.Namespace + "/" + k.owner.Name
}

// liveState is what one read of the API server found. NotFound is an
// answer (gone), not an error.
type liveState struct {
	err      error
	live     bool          // the namespace lives, or the owner exists and is not being deleted
	owner    release.Owner // a live owner, as the planner reads it
	recreate bool          // the owner, live or being deleted, opts in to RecreateAnnotation
	// annotations are the object's (nil when gone), for the policy they
	// set: TTLAnnotation.
	annotations map[string]string
}

// readLive reads k from the API server, not from a cache.
func (rel *releaser) readLive(ctx context.Context, k liveKey) liveState {
	if k.pod != "" {
		p, err := rel.kube.CoreV1().Pods(k.namespace).Get(ctx, k.pod, metav1.GetOptions{})
		if err != nil {
			return goneOr(err)
		}
		return liveState{live: true, annotations: p.Annotations}
	}
	if k.owner == (release.OwnerKey{}) {
		ns, err := rel.kube.CoreV1().Namespaces().Get(ctx, k.namespace, metav1.GetOptions{})
		if err != nil {
			return goneOr(err)
		}
		return liveState{live: ns.DeletionTimestamp == nil && ns.Status.Phase != corev1.NamespaceTerminating, annotations: ns.Annotations}
	}
	o := k.owner
	switch o.Kind {
	case "StatefulSet":
		s, err := rel.kube.AppsV1().StatefulSets(o.Namespace).Get(ctx, o.Name, metav1.GetOptions{})
		if err != nil {
			return goneOr(err)
		}
		st := liveState{recreate: keeps(release.RecreateAnnotation, s.Annotations), annotations: s.Annotations}
		st.owner, st.live = setOwner(s)
		st.owner.KeepScaledDown = keeps(release.ScaleDownAnnotation, s.Annotations)
		return st
	case "ReplicaSet":
		return rel.readReplicaSet(ctx, o)
	}
	return rel.owners.readLive(ctx, o)
}

// readReplicaSet reads a ReplicaSet and, if a Deployment controls it,
// that Deployment: the ReplicaSet is judged gone with it.
func (rel *releaser) readReplicaSet(ctx context.Context, o release.OwnerKey) liveState {
	rs, err := rel.kube.AppsV1().ReplicaSets(o.Namespace).Get(ctx, o.Name, metav1.GetOptions{})
	if err != nil {
		return goneOr(err)
	}
	parentUID := ""
	if name := parentName(rs); name != "" {
		d, err := rel.kube.AppsV1().Deployments(o.Namespace).Get(ctx, name, metav1.GetOptions{})
		switch {
		case err == nil && d.DeletionTimestamp == nil:
			parentUID = string(d.UID)
		case err != nil && !apierrors.IsNotFound(err):
			return liveState{err: fmt.Errorf("its Deployment %s: %w", name, err)}
		}
	}
	var st liveState
	st.owner, st.live = replicaSetOwner(rs, parentUID)
	return st
}

// readLive reads an owner of a kind beyond apps/v1 through the client of
// its watch: Kruise's whole, a listed kind's metadata.
func (ws *ownerWatches) readLive(ctx context.Context, o release.OwnerKey) liveState {
	if ws == nil {
		return liveState{err: fmt.Errorf("kind %s is not watched", o.Kind)}
	}
	ws.mu.Lock()
	var gvr schema.GroupVersionResource
	if w := ws.byKey[o.Kind]; w != nil {
		gvr = w.gvr
	}
	ws.mu.Unlock()
	if gvr.Resource == "" {
		return liveState{err: fmt.Errorf("kind %s is not watched", o.Kind)}
	}
	if o.Kind == owners.KruiseStatefulSet.Key() {
		u, err := ws.clients.Dynamic.Resource(gvr).Namespace(o.Namespace).Get(ctx, o.Name, metav1.GetOptions{})
		if err != nil {
			return goneOr(err)
		}
		return liveState{live: u.GetDeletionTimestamp() == nil, owner: kruiseOwner(u), recreate: keeps(release.RecreateAnnotation, u.GetAnnotations()), annotations: u.GetAnnotations()}
	}
	m, err := ws.clients.Metadata.Resource(gvr).Namespace(o.Namespace).Get(ctx, o.Name, metav1.GetOptions{})
	if err != nil {
		return goneOr(err)
	}
	return liveState{live: m.GetDeletionTimestamp() == nil, owner: release.Owner{UID: string(m.GetUID())}, recreate: keeps(release.RecreateAnnotation, m.GetAnnotations()), annotations: m.GetAnnotations()}
}

// goneOr is a failed read's state: NotFound says gone; anything else says
// nothing.
func goneOr(err error) liveState {
	if apierrors.IsNotFound(err) {
		return liveState{}
	}
	return liveState{err: err}
}

// keeps reads a Keep/ReleaseNow annotation; an invalid one reads as not
// kept, as the policy of the caches does (which reports it).
func keeps(annotation string, ann map[string]string) bool {
	k, _ := release.ParseKeep(annotation, ann[annotation])
	return k
}
