package cnichain

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/cache"

	"github.com/capo-net/capo/daemon/agent/kubecache"
	"github.com/capo-net/capo/pkg/kubeclient"
	"github.com/capo-net/capo/pkg/pause"
)

// Removal tells, when the agent stops, whether capo is being removed from
// the cluster (its DaemonSet deleted) rather than restarted (a rolling
// update, a node reboot, a pod deleted by hand). It decides from what it
// already knows: `kubectl delete -f` may remove the agent's ServiceAccount
// and RBAC before its DaemonSet, so a question asked only at exit can be
// refused. A watch opened while the RBAC stood keeps delivering, and a
// refusal at exit is itself a sign that capo's objects are going.
type Removal struct {
	kube     kubernetes.Interface
	meta     metadata.Interface // the DaemonSet's own: its spec and status are never read
	ns, name string             // this pod

	grace time.Duration // see replaceGrace

	mu    sync.Mutex
	owner *metav1.OwnerReference // the DaemonSet running this pod; nil until known
	gone  string                 // why the DaemonSet is known to be going; "" while it stands
}

// NewRemoval watches for the removal of the DaemonSet running pod ns/name;
// grace is how long one seen going may take to come back under its name
// (0: replaceGrace).
func NewRemoval(kube kubernetes.Interface, meta metadata.Interface, ns, name string, grace time.Duration) *Removal {
	if grace <= 0 {
		grace = replaceGrace
	}
	return &Removal{kube: kube, meta: meta, ns: ns, name: name, grace: grace}
}

// Watch learns this pod's DaemonSet, then follows it until ctx ends.
func (r *Removal) Watch(ctx context.Context) {
	if r.name == "" {
		return // not run as a pod: nothing to follow
	}
	for r.getOwner() == nil {
		if err := r.resolveOwner(ctx); err != nil {
			slog.Warn("cannot read this agent's pod yet; retrying", "pod", r.ns+"/"+r.name, "err", err)
		}
		if r.getOwner() != nil || !pause.Sleep(ctx, 5*time.Second) {
			break
		}
	}
	owner := r.getOwner()
	if owner == nil {
		return
	}
	inf := kubecache.MetaInformer(r.meta, appsv1.SchemeGroupVersion.WithResource("daemonsets"), r.ns, fields.OneTermEqualSelector("metadata.name", owner.Name), kubecache.TrimIdentity)
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    r.observe,
		UpdateFunc: func(_, obj any) { r.observe(obj) },
		DeleteFunc: func(obj any) {
			if _, ok := kubeclient.Deleted[metav1.PartialObjectMetadata](obj); ok {
				r.markGone("its DaemonSet was deleted")
			}
		},
	})
	inf.Run(ctx.Done())
}

func (r *Removal) resolveOwner(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	pod, err := r.kube.CoreV1().Pods(r.ns).Get(ctx, r.name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	ref := metav1.GetControllerOf(pod)
	if ref == nil || ref.Kind != "DaemonSet" {
		slog.Info("this agent is not run by a DaemonSet: capo is never removed on its exit", "pod", r.ns+"/"+r.name)
		ref = &metav1.OwnerReference{} // known: no DaemonSet
	}
	r.mu.Lock()
	r.owner = ref
	r.mu.Unlock()
	return nil
}

// observe follows the DaemonSet of the owner's name: one being deleted
// is going; one standing, whatever its UID, is capo staying (a DaemonSet
// re-created under the same name runs the same agents).
func (r *Removal) observe(obj any) {
	ds, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok || r.getOwner() == nil {
		return
	}
	if ds.DeletionTimestamp != nil {
		r.markGone("its DaemonSet is being deleted")
		return
	}
	r.markGone("")
}

func (r *Removal) markGone(why string) {
	r.mu.Lock()
	r.gone = why
	r.mu.Unlock()
}

func (r *Removal) getOwner() *metav1.OwnerReference {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.owner
}

// replaceGrace is how long a DaemonSet seen going may take to come back
// under the same name (helm upgrade --force, kubectl replace --force, a
// GitOps replace) before the agent takes it for an uninstall. It fits in
// the pod's 30 s termination grace with the socket's last answers.
const replaceGrace = 12 * time.Second

// removing is asked at exit: is capo going, and why. Only a DaemonSet
// that stays gone (no DaemonSet of its name, or only one being deleted)
// for the grace is an uninstall: one re-created under the same name is
// not. A refusal (the token or the RBAC gone) counts as going unless the
// RBAC comes back within the grace; a read that cannot answer at all
// leaves the decision to what the watch saw.
func (r *Removal) removing(ctx context.Context) (bool, string) {
	r.mu.Lock()
	owner := r.owner
	r.mu.Unlock()
	switch {
	case owner == nil && r.name == "":
		return false, "not run as a pod"
	case owner != nil && owner.Kind != "DaemonSet":
		return false, "not run by a DaemonSet"
	case owner == nil:
		if err := r.resolveOwner(ctx); err != nil {
			return r.unanswered(err)
		}
		return r.removing(ctx)
	}
	grace := r.grace
	deadline := time.Now().Add(grace)
	for {
		going, why, answered := r.liveRead(ctx, owner)
		switch {
		case !answered:
			return r.unanswered(errors.New(why))
		case !going:
			return false, why
		case !time.Now().Before(deadline):
			return true, why + fmt.Sprintf(" (and stayed so for %s)", grace)
		}
		if !pause.Sleep(ctx, min(time.Second, grace)) {
			return r.unanswered(ctx.Err())
		}
	}
}

// liveRead reads the DaemonSet of this pod's owner's name once.
func (r *Removal) liveRead(ctx context.Context, owner *metav1.OwnerReference) (going bool, why string, answered bool) {
	rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	ds, err := r.kube.AppsV1().DaemonSets(r.ns).Get(rctx, owner.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return true, "its DaemonSet is gone", true
	case apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err):
		return true, "the API refuses its credentials (capo's ServiceAccount or RBAC deleted): " + err.Error(), true
	case err != nil:
		return false, err.Error(), false
	case ds.DeletionTimestamp != nil:
		return true, "its DaemonSet is being deleted", true
	case ds.UID != owner.UID:
		return false, "its DaemonSet was re-created under the same name (a replace, not an uninstall)", true
	}
	return false, "its DaemonSet stands (a restart or a rolling update)", true
}

// unanswered decides when the API cannot be read: what the watch saw
// going (the RBAC deleted before the DaemonSet), else staying.
func (r *Removal) unanswered(err error) (bool, string) {
	r.mu.Lock()
	gone := r.gone
	r.mu.Unlock()
	if gone != "" {
		return true, gone + " (seen by the watch; the API cannot be read now: " + err.Error() + ")"
	}
	return false, "cannot tell (" + err.Error() + "): leaving the CNI chain as it is"
}
