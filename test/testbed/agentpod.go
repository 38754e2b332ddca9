package testbed

import (
	"context"
	"fmt"
	"net"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// agentPodLabels are the chart's capo-agent pod labels: capo-controller
// reads a node's coverage from the readiness of such a pod.
var agentPodLabels = map[string]string{"app.kubernetes.io/name": "capo", "app.kubernetes.io/component": "agent", "app": "capo-agent"}

// setAgentPodReady does what the kubelet does for the agent process the
// bed runs: it reports the agent pod Ready while /readyz answers, NotReady
// once it stops. The pod object is made if the test has none.
func (e *Env) setAgentPodReady(namespace, name string, ready bool) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pods := e.Kube.CoreV1().Pods(namespace)
	p, err := pods.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		if !ready {
			return nil
		}
		p, err = pods.Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: agentPodLabels},
			Spec:       corev1.PodSpec{NodeName: e.Node, Containers: []corev1.Container{{Name: "agent", Image: "registry.invalid/capo:1"}}},
		}, metav1.CreateOptions{})
	}
	if err != nil {
		return fmt.Errorf("agent pod %s/%s: %w", namespace, name, err)
	}
	for k, v := range agentPodLabels {
		if p.Labels == nil {
			p.Labels = map[string]string{}
		}
		if p.Labels[k] != v {
			p.Labels[k] = v
			if p, err = pods.Update(ctx, p, metav1.UpdateOptions{}); err != nil {
				return fmt.Errorf("agent pod labels: %w", err)
			}
			break
		}
	}
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	p.Status.Phase = corev1.PodRunning
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: status, LastTransitionTime: metav1.Now()}}
	if _, err := pods.UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("agent pod status: %w", err)
	}
	return nil
}

// createAgentPod makes the agent's pod as the kubelet would show a
// hostNetwork pod: the host's address as its IP, and its metrics port
// named, so that the API server's pod proxy reaches the agent process.
func (e *Env) createAgentPod(namespace, name, hostIP string, port int) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pods := e.Kube.CoreV1().Pods(namespace)
	p, err := pods.Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: agentPodLabels},
		Spec: corev1.PodSpec{NodeName: e.Node, HostNetwork: true, Containers: []corev1.Container{{
			Name: "agent", Image: "registry.invalid/capo:1",
			Ports: []corev1.ContainerPort{{Name: "metrics", ContainerPort: int32(port)}},
		}}},
	}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("agent pod %s/%s: %w", namespace, name, err)
	}
	p.Status.PodIP, p.Status.PodIPs, p.Status.HostIP = hostIP, []corev1.PodIP{{IP: hostIP}}, hostIP
	if _, err := pods.UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("agent pod %s/%s status: %w", namespace, name, err)
	}
	return nil
}

// HostIP is this host's first global unicast IPv4 address, "" if none.
func HostIP() string {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return ""
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && n.IP.IsGlobalUnicast() {
			return n.IP.String()
		}
	}
	return ""
}
