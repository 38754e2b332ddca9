package robust

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/capo-net/capo/pkg/pause"
)

// Each node runs a calico-node pod, as Calico's DaemonSet does: capo-agent
// watches it (--calico-node-selector, k8s-app=calico-node), because
// calico-node's install-cni rewrites the node's conflist without capo-ipam
// each time a calico-node pod starts, and nothing else rewrites it.

// calicoNodeLabels are those of Calico's DaemonSet's pods.
var calicoNodeLabels = map[string]string{"k8s-app": "calico-node"}

// startCalicoNode creates the node's calico-node pod, initialised and
// running unless starting says its install-cni has yet to run.
func (c *cluster) startCalicoNode(ctx context.Context, i int, starting bool) error {
	n := c.nodes[i]
	n.mu.Lock()
	n.calicoNodes++
	name := fmt.Sprintf("calico-node-%d-%d", i, n.calicoNodes)
	n.calicoNode = name
	n.mu.Unlock()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: c.ns, Labels: calicoNodeLabels},
		Spec: corev1.PodSpec{
			NodeName: n.env.Node, HostNetwork: true,
			Containers: []corev1.Container{{Name: "calico-node", Image: "registry.invalid/calico-node:1"}},
		},
	}
	if _, err := c.createPod(ctx, pod); err != nil {
		return err
	}
	return c.calicoNodeInitialized(ctx, name, !starting)
}

// calicoNodeInitialized sets the pod's Initialized condition and phase as
// the kubelet does around its init containers.
func (c *cluster) calicoNodeInitialized(ctx context.Context, name string, done bool) error {
	return retryAPI(ctx, func(ctx context.Context) error {
		p, err := c.bed.Kube.CoreV1().Pods(c.ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		status, phase := corev1.ConditionFalse, corev1.PodPending
		if done {
			status, phase = corev1.ConditionTrue, corev1.PodRunning
		}
		p.Status.Phase = phase
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodInitialized, Status: status, LastTransitionTime: metav1.Now()}}
		_, err = c.bed.Kube.CoreV1().Pods(c.ns).UpdateStatus(ctx, p, metav1.UpdateOptions{})
		return err
	})
}

// conflistRewrite replaces a node's calico-node pod, as a rollout or an
// eviction of calico-node does: the old pod terminates (its grace period
// running, then gone), the DaemonSet's successor starts, its install-cni
// writes Calico's own conflist (without capo-ipam) in place, and then it
// is initialised. The node's agent holds the node's selected pods'
// addresses meanwhile and puts capo-ipam back.
func conflistRewrite(ctx context.Context, c *cluster, r *rand.Rand, _ time.Duration) (string, error) {
	i := r.IntN(len(c.nodes))
	n := c.nodes[i]
	n.mu.Lock()
	old := n.calicoNode
	n.mu.Unlock()
	grace := int64(30)
	err := retryAPI(ctx, func(ctx context.Context) error {
		return c.bed.Kube.CoreV1().Pods(c.ns).Delete(ctx, old, metav1.DeleteOptions{GracePeriodSeconds: &grace})
	})
	if err != nil {
		return "", err
	}
	pause.Sleep(ctx, time.Second) // calico-node shutting down
	if err := c.deletePod(ctx, old); err != nil {
		return "", err
	}
	if err := c.startCalicoNode(ctx, i, true); err != nil {
		return "", err
	}
	pause.Sleep(ctx, 300*time.Millisecond) // its sandbox starts
	if err := try(func() { n.cni.CalicoNodeRewrites(n.env) }); err != nil {
		return "", err
	}
	pause.Sleep(ctx, time.Second) // install-cni exits, calico-node starts
	n.mu.Lock()
	now := n.calicoNode
	n.mu.Unlock()
	if err := c.calicoNodeInitialized(ctx, now, true); err != nil {
		return "", err
	}
	return n.env.Node + ": " + old + " replaced by " + now, nil
}

// settleCalicoNodes leaves each node's calico-node pod running and
// initialised, as its DaemonSet does once a rollout is over: a replacement
// a fault left half done (the run's end cut it short) is finished, so the
// agents' holds of a replacement still under way end as in any cluster.
func (c *cluster) settleCalicoNodes(ctx context.Context) error {
	for i, n := range c.nodes {
		n.mu.Lock()
		name := n.calicoNode
		n.mu.Unlock()
		var p *corev1.Pod
		err := retryAPI(ctx, func(ctx context.Context) error {
			var err error
			p, err = c.bed.Kube.CoreV1().Pods(c.ns).Get(ctx, name, metav1.GetOptions{})
			return err
		})
		switch {
		case apierrors.IsNotFound(err):
			err = c.startCalicoNode(ctx, i, false)
		case err == nil && p.DeletionTimestamp != nil:
			if err = c.deletePod(ctx, name); err == nil {
				err = c.startCalicoNode(ctx, i, false)
			}
		case err == nil:
			err = c.calicoNodeInitialized(ctx, name, true)
		}
		if err != nil {
			return fmt.Errorf("%s's calico-node pod %s: %w", n.env.Node, name, err)
		}
	}
	return nil
}
