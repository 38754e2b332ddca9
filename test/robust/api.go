package robust

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	cerrors "github.com/projectcalico/calico/libcalico-go/lib/errors"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/capo-net/capo/pkg/release"
)

// What the kubelet, the scheduler and the workload controllers do to the
// API objects, straight to the API server (not through the proxy: the
// proxy fails capo's clients, not the cluster). Each call is retried
// while the API server is away, as those components retry.

// retryAPI runs f until it succeeds, fails for good (not found, already
// exists, invalid), apiPatience has passed, or ctx has ended.
func retryAPI(ctx context.Context, f func(context.Context) error) error {
	deadline := time.Now().Add(apiPatience)
	for wait := 200 * time.Millisecond; ; wait = min(2*wait, 2*time.Second) {
		cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		err := f(cctx)
		cancel()
		if err == nil || final(err) || time.Now().After(deadline) || ctx.Err() != nil {
			return err
		}
		time.Sleep(wait)
	}
}

// final reports whether err is an answer no retry changes: not found,
// already exists, invalid. libcalico-go's datastore error reads as
// invalid whatever it wraps (its Status says so for any error that is not
// the API server's own), so an etcd that cannot be reached is told apart:
// it is retried.
func final(err error) bool {
	var ds cerrors.ErrorDatastoreError
	if errors.As(err, &ds) {
		var api apierrors.APIStatus
		if !errors.As(ds.Err, &api) {
			return false
		}
	}
	return apierrors.IsNotFound(err) || apierrors.IsAlreadyExists(err) || apierrors.IsInvalid(err)
}

// apiPatience is how long the cluster's components keep retrying a call.
const apiPatience = 2 * time.Minute

func (c *cluster) podObject(p *podState, node int) *corev1.Pod {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: p.name, Namespace: c.ns, Labels: map[string]string{"app": "web"}},
		Spec: corev1.PodSpec{
			NodeName:   c.nodes[node].env.Node,
			Containers: []corev1.Container{{Name: "main", Image: "registry.invalid/app:1"}},
		},
	}
	if s := p.set; s != nil {
		yes := true
		pod.Labels = map[string]string{"app": s.name, "statefulset.kubernetes.io/pod-name": p.name}
		pod.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: s.name, UID: s.uid, Controller: &yes}}
	}
	return pod
}

func (c *cluster) createPod(ctx context.Context, obj *corev1.Pod) (*corev1.Pod, error) {
	var out *corev1.Pod
	err := retryAPI(ctx, func(ctx context.Context) error {
		var err error
		out, err = c.bed.Kube.CoreV1().Pods(c.ns).Create(ctx, obj, metav1.CreateOptions{})
		return err
	})
	return out, err
}

func (c *cluster) deletePod(ctx context.Context, name string) error {
	grace := int64(0)
	err := retryAPI(ctx, func(ctx context.Context) error {
		return c.bed.Kube.CoreV1().Pods(c.ns).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &grace})
	})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// setStatus sets a pod's phase (and reason), and its addresses when
// given (Running), as the kubelet reports them.
func (c *cluster) setStatus(ctx context.Context, name string, phase corev1.PodPhase, reason string, ips []string) error {
	return retryAPI(ctx, func(ctx context.Context) error {
		p, err := c.bed.Kube.CoreV1().Pods(c.ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		p.Status.Phase, p.Status.Reason = phase, reason
		if len(ips) > 0 { // an eviction leaves the addresses in the status
			p.Status.PodIP, p.Status.PodIPs = ips[0], nil
			for _, ip := range ips {
				p.Status.PodIPs = append(p.Status.PodIPs, corev1.PodIP{IP: ip})
			}
		}
		_, err = c.bed.Kube.CoreV1().Pods(c.ns).UpdateStatus(ctx, p, metav1.UpdateOptions{})
		return err
	})
}

func (c *cluster) createSet(ctx context.Context, s *setState, replicas int) (types.UID, error) {
	n := int32(replicas)
	obj := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: s.name, Namespace: c.ns}, Spec: appsv1.StatefulSetSpec{
		Replicas: &n, ServiceName: s.name,
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": s.name}},
		Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": s.name}},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "registry.invalid/app:1"}}},
		},
	}}
	var uid types.UID
	err := retryAPI(ctx, func(ctx context.Context) error {
		out, err := c.bed.Kube.AppsV1().StatefulSets(c.ns).Create(ctx, obj, metav1.CreateOptions{})
		if err == nil {
			uid = out.UID
		}
		return err
	})
	if apierrors.IsAlreadyExists(err) { // made by a try whose answer was lost
		err = retryAPI(ctx, func(ctx context.Context) error {
			out, err := c.bed.Kube.AppsV1().StatefulSets(c.ns).Get(ctx, s.name, metav1.GetOptions{})
			if err == nil {
				uid = out.UID
			}
			return err
		})
	}
	return uid, err
}

func (c *cluster) patchSet(ctx context.Context, name string, body map[string]any) error {
	p, err := json.Marshal(body)
	if err != nil {
		return err
	}
	return retryAPI(ctx, func(ctx context.Context) error {
		_, err := c.bed.Kube.AppsV1().StatefulSets(c.ns).Patch(ctx, name, types.MergePatchType, p, metav1.PatchOptions{})
		return err
	})
}

func (c *cluster) scaleSet(ctx context.Context, name string, replicas int) error {
	return c.patchSet(ctx, name, map[string]any{"spec": map[string]any{"replicas": replicas}})
}

// setTTL sets (or, with "", removes) the set's reservation time.
func (c *cluster) setTTL(ctx context.Context, name, ttl string) error {
	var v any = ttl
	if ttl == "" {
		v = nil
	}
	return c.patchSet(ctx, name, map[string]any{"metadata": map[string]any{"annotations": map[string]any{release.TTLAnnotation: v}}})
}

func (c *cluster) deleteSet(ctx context.Context, name string) error {
	err := retryAPI(ctx, func(ctx context.Context) error {
		return c.bed.Kube.AppsV1().StatefulSets(c.ns).Delete(ctx, name, metav1.DeleteOptions{})
	})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// askRelease asks capo-controller for a release by hand, as an operator
// does: the node's key in the release ConfigMap of capo's namespace.
func (c *cluster) askRelease(ctx context.Context, node, value string) error {
	cms := c.bed.Kube.CoreV1().ConfigMaps(c.ns)
	p, err := json.Marshal(map[string]any{"data": map[string]string{node: value}})
	if err != nil {
		return err
	}
	return retryAPI(ctx, func(ctx context.Context) error {
		_, err := cms.Patch(ctx, "capo-release", types.MergePatchType, p, metav1.PatchOptions{})
		if apierrors.IsNotFound(err) {
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "capo-release"}, Data: map[string]string{node: value}}
			if _, err = cms.Create(ctx, cm, metav1.CreateOptions{}); apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("made meanwhile (%v): patching it on the next try", err)
			}
		}
		return err
	})
}
