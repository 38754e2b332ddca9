package agent

import (
	"context"
	"log/slog"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/capo-net/capo/pkg/kubeclient"
)

// removal tells, when the agent stops, whether capo is being removed from
// the cluster (its DaemonSet deleted) rather than restarted (a rolling
// update, a node reboot, a pod deleted by hand). It decides from what it
// already knows: `kubectl delete -f` may remove the agent's ServiceAccount
// and RBAC before its DaemonSet, so a question asked only at exit can be
// refused. A watch opened while the RBAC stood keeps delivering, and a
// refusal at exit is itself a sign that capo's objects are going.
type removal struct {
	kube     kubernetes.Interface
	ns, name string // this pod

	mu    sync.Mutex
	owner *metav1.OwnerReference // the DaemonSet running this pod; nil until known
	gone  string                 // why the DaemonSet is known to be going; "" while it stands
}

func newRemoval(kube kubernetes.Interface, ns, name string) *removal {
	return &removal{kube: kube, ns: ns, name: name}
}

// watch learns this pod's DaemonSet, then follows it until ctx ends.
func (r *removal) watch(ctx context.Context) {
	if r.name == "" {
		return // not run as a pod: nothing to follow
	}
	for r.getOwner() == nil {
		if err := r.resolveOwner(ctx); err != nil {
			slog.Warn("cannot read this agent's pod yet; retrying", "pod", r.ns+"/"+r.name, "err", err)
		}
		if r.getOwner() != nil || !sleep(ctx, 5*time.Second) {
			break
		}
	}
	owner := r.getOwner()
	if owner == nil {
		return
	}
	f := informers.NewSharedInformerFactoryWithOptions(r.kube, 0, informers.WithNamespace(r.ns), informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("metadata.name", owner.Name).String()
	}))
	inf := f.Apps().V1().DaemonSets().Informer()
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(_, obj any) { r.observe(obj) },
		DeleteFunc: func(obj any) {
			if ds, ok := kubeclient.Deleted[appsv1.DaemonSet](obj); ok && ds.UID == owner.UID {
				r.markGone("its DaemonSet was deleted")
			}
		},
	})
	inf.Run(ctx.Done())
}

func (r *removal) resolveOwner(ctx context.Context) error {
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

func (r *removal) observe(obj any) {
	ds, ok := obj.(*appsv1.DaemonSet)
	owner := r.getOwner()
	if !ok || owner == nil {
		return
	}
	switch {
	case ds.UID != owner.UID:
		r.markGone("its DaemonSet was replaced by another of the same name")
	case ds.DeletionTimestamp != nil:
		r.markGone("its DaemonSet is being deleted")
	}
}

func (r *removal) markGone(why string) {
	r.mu.Lock()
	r.gone = why
	r.mu.Unlock()
}

func (r *removal) getOwner() *metav1.OwnerReference {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.owner
}

// removing is asked at exit: is capo going, and why. What the watch saw
// decides first; otherwise one live read, where a refusal (the token or the
// RBAC gone) counts as going and any other failure as staying.
func (r *removal) removing(ctx context.Context) (bool, string) {
	r.mu.Lock()
	owner, gone := r.owner, r.gone
	r.mu.Unlock()
	switch {
	case gone != "":
		return true, gone
	case owner == nil && r.name == "":
		return false, "not run as a pod"
	case owner != nil && owner.Kind != "DaemonSet":
		return false, "not run by a DaemonSet"
	case owner == nil:
		if err := r.resolveOwner(ctx); err != nil {
			return refusal(err)
		}
		return r.removing(ctx)
	}
	ds, err := r.kube.AppsV1().DaemonSets(r.ns).Get(ctx, owner.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return true, "its DaemonSet is gone"
	case err != nil:
		return refusal(err)
	case ds.UID != owner.UID:
		return true, "its DaemonSet was replaced by another of the same name"
	case ds.DeletionTimestamp != nil:
		return true, "its DaemonSet is being deleted"
	}
	return false, "its DaemonSet stands (a restart or a rolling update)"
}

// refusal: the API turning the agent away means its ServiceAccount or RBAC
// was deleted, which only happens when capo is being removed.
func refusal(err error) (bool, string) {
	if apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) {
		return true, "the API refuses its credentials (capo's ServiceAccount or RBAC deleted): " + err.Error()
	}
	return false, "cannot tell (" + err.Error() + "): leaving the CNI chain as it is"
}
