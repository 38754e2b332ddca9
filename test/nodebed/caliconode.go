package nodebed

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// CalicoNodeLabels are the labels Calico's manifests and operator give
// calico-node's pods (capo-agent's --calico-node-selector by default).
var CalicoNodeLabels = map[string]string{"k8s-app": "calico-node"}

// CalicoNode creates, in ns, the bed's model of calico-node's DaemonSet:
// a host-network pod whose install-cni init container writes Calico's
// conflist over the node's, as calico-node's does each time its pod
// starts (the bed's felix runs outside it). Restart replaces its pod.
func (b *Bed) CalicoNode(t testing.TB, ns string) *appsv1.DaemonSet {
	t.Helper()
	ctx := context.Background()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "calico-config", Namespace: ns}, Data: map[string]string{"10-calico.conflist": string(b.CalicoConflist)}}
	if _, err := b.Kube.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	grace := int64(1)
	ds := &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: "calico-node", Namespace: ns},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: CalicoNodeLabels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: CalicoNodeLabels}, Spec: corev1.PodSpec{
				HostNetwork: true, TerminationGracePeriodSeconds: &grace,
				Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
				InitContainers: []corev1.Container{{
					Name: "install-cni", Image: SleeperImage, ImagePullPolicy: corev1.PullNever,
					Args:         []string{"-install-cni=/calico/10-calico.conflist:/host" + Conflist},
					VolumeMounts: []corev1.VolumeMount{{Name: "calico-config", MountPath: "/calico"}, {Name: "cni-net-dir", MountPath: "/host" + CNIConfDir}},
				}},
				Containers: []corev1.Container{{Name: "calico-node", Image: SleeperImage, ImagePullPolicy: corev1.PullNever}},
				Volumes: []corev1.Volume{
					{Name: "calico-config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "calico-config"}}}},
					{Name: "cni-net-dir", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: CNIConfDir}}},
				},
			}},
		},
	}
	out, err := b.Kube.AppsV1().DaemonSets(ns).Create(ctx, ds, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b.WaitRunning(t, ns, "k8s-app=calico-node", 1)
	return out
}

// Restart has ds's controller replace its pods, as a Calico upgrade does
// (kubectl rollout restart).
func (b *Bed) Restart(t testing.TB, ds *appsv1.DaemonSet) {
	t.Helper()
	patch, _ := json.Marshal(map[string]any{"spec": map[string]any{"template": map[string]any{"metadata": map[string]any{
		"annotations": map[string]string{"capo.test/restartedAt": time.Now().Format(time.RFC3339Nano)},
	}}}})
	if _, err := b.Kube.AppsV1().DaemonSets(ds.Namespace).Patch(context.Background(), ds.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}
