package nodebed

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// CalicoNodeLabels are the labels Calico's manifests and operator give
// calico-node's pods (capo-agent's --calico-node-selector by default).
var CalicoNodeLabels = map[string]string{"k8s-app": "calico-node"}

// CalicoNodeNamespace holds the bed's model of calico-node, where
// Calico's manifests put calico-node.
const CalicoNodeNamespace = "kube-system"

// CalicoNode is the bed's model of calico-node's DaemonSet on the first
// node: a host-network pod whose install-cni init container writes
// Calico's conflist over the node's, as calico-node's does each time its
// pod starts (the bed's felix runs outside it). Made on first use and kept
// for the bed's life, as calico-node is on a real node: removing it would
// look like a replacement to the agent. Restart replaces its pod.
func (b *Bed) CalicoNode(t testing.TB) *appsv1.DaemonSet {
	t.Helper()
	ctx := context.Background()
	if ds, err := b.Kube.AppsV1().DaemonSets(CalicoNodeNamespace).Get(ctx, "calico-node", metav1.GetOptions{}); err == nil {
		return ds
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "calico-config", Namespace: CalicoNodeNamespace}, Data: map[string]string{"10-calico.conflist": string(b.CalicoConflist)}}
	if _, err := b.Kube.CoreV1().ConfigMaps(CalicoNodeNamespace).Create(ctx, cm, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	out, err := b.Kube.AppsV1().DaemonSets(CalicoNodeNamespace).Create(ctx, b.calicoNodeSet(), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b.WaitRunning(t, CalicoNodeNamespace, "k8s-app=calico-node", 1)
	return out
}

// calicoNodeSet is the model's DaemonSet, on the first node only (the
// second has its own conflist). Its pod takes 4 s to stop, as calico-node
// takes a while (BIRD's graceful shutdown): the DaemonSet replaces it only
// once it is gone. It is system-node-critical, as calico-node is: the
// kubelet neither evicts it nor refuses it under memory pressure (the
// eviction tests), which would replace it behind the tests' backs.
func (b *Bed) calicoNodeSet() *appsv1.DaemonSet {
	grace := int64(10)
	return &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: "calico-node", Namespace: CalicoNodeNamespace},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: CalicoNodeLabels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: CalicoNodeLabels}, Spec: corev1.PodSpec{
				HostNetwork: true, TerminationGracePeriodSeconds: &grace, PriorityClassName: "system-node-critical",
				NodeSelector: map[string]string{"kubernetes.io/hostname": b.NodeName},
				Tolerations:  []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
				InitContainers: []corev1.Container{{
					Name: "install-cni", Image: SleeperImage, ImagePullPolicy: corev1.PullNever,
					Args:         []string{"-install-cni=/calico/10-calico.conflist:/host" + Conflist},
					VolumeMounts: []corev1.VolumeMount{{Name: "calico-config", MountPath: "/calico"}, {Name: "cni-net-dir", MountPath: "/host" + CNIConfDir}},
				}},
				Containers: []corev1.Container{{Name: "calico-node", Image: SleeperImage, ImagePullPolicy: corev1.PullNever, Args: []string{"-grace=4s"}}},
				Volumes: []corev1.Volume{
					{Name: "calico-config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "calico-config"}}}},
					{Name: "cni-net-dir", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: CNIConfDir}}},
				},
			}},
		},
	}
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
