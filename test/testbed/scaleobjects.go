package testbed

import (
	"context"
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/capo-net/capo/pkg/selection"
)

// ScaleNamespace is a namespace as clusters have them: a team label, a
// couple of annotations; one in ten carries Capo's ip-reserve label.
func ScaleNamespace(name string, i int) *corev1.Namespace {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name:   name,
		Labels: map[string]string{"team": "team-" + strconv.Itoa(i%37), "environment": "production"},
		Annotations: map[string]string{
			"owner": "platform-team@example.com",
			"scheduler.alpha.kubernetes.io/node-selector": "pool=general",
		},
	}}
	if i%10 == 0 {
		ns.Labels[selection.NamespaceLabel] = selection.Enabled
	}
	return ns
}

// ScalePod is a StatefulSet pod as the StatefulSet controller and the
// admission chain make it (two containers, environment, probes, projected
// service account token), bound to node. Its status is the kubelet's to
// set: see ScalePodRunning.
func ScalePod(namespace, name, node string) *corev1.Pod {
	set := "db"
	yes := true
	env := make([]corev1.EnvVar, 0, 10)
	for i := range 8 {
		env = append(env, corev1.EnvVar{Name: fmt.Sprintf("SETTING_%d", i), Value: fmt.Sprintf("value-of-setting-%d-for-%s", i, set)})
	}
	env = append(env, corev1.EnvVar{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}})
	res := corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m"), corev1.ResourceMemory: resource.MustParse("512Mi")},
		Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")},
	}
	probe := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(6379)}}, PeriodSeconds: 10, TimeoutSeconds: 1, FailureThreshold: 3, SuccessThreshold: 1}
	mounts := []corev1.VolumeMount{{Name: "data", MountPath: "/data"}, {Name: "config", MountPath: "/etc/db"}, {Name: "kube-api-access", MountPath: "/var/run/secrets/kubernetes.io/serviceaccount", ReadOnly: true}}
	main := corev1.Container{
		Name: "db", Image: "registry.example.com/db/server:7.2.4", Command: []string{"/usr/local/bin/db-server"}, Args: []string{"/etc/db/db.conf", "--cluster-enabled", "yes"},
		Ports: []corev1.ContainerPort{{Name: "client", ContainerPort: 6379, Protocol: corev1.ProtocolTCP}, {Name: "gossip", ContainerPort: 16379, Protocol: corev1.ProtocolTCP}},
		Env:   env, Resources: res, VolumeMounts: mounts, LivenessProbe: probe, ReadinessProbe: probe,
		TerminationMessagePath: "/dev/termination-log", TerminationMessagePolicy: corev1.TerminationMessageReadFile, ImagePullPolicy: corev1.PullIfNotPresent,
	}
	exporter := corev1.Container{
		Name: "exporter", Image: "registry.example.com/db/exporter:1.58.0", Env: env[:4], Resources: res, VolumeMounts: mounts[2:],
		Ports:                  []corev1.ContainerPort{{Name: "metrics", ContainerPort: 9121, Protocol: corev1.ProtocolTCP}},
		TerminationMessagePath: "/dev/termination-log", TerminationMessagePolicy: corev1.TerminationMessageReadFile, ImagePullPolicy: corev1.PullIfNotPresent,
	}
	token := int64(3607)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: namespace, GenerateName: set + "-",
			Labels: map[string]string{
				"app": set, "app.kubernetes.io/name": set, "app.kubernetes.io/instance": set + "-main",
				"controller-revision-hash": set + "-7d9f8c6b5", "statefulset.kubernetes.io/pod-name": name, "apps.kubernetes.io/pod-index": "0",
			},
			Annotations: map[string]string{
				"prometheus.io/scrape": "true", "prometheus.io/port": "9121",
				"kubectl.kubernetes.io/restartedAt": "2025-10-01T09:12:44Z", "cni.projectcalico.org/containerID": "3c1f0e5e9b7a4d2c8f6b1a0e9d8c7b6a5f4e3d2c1b0a9f8e7d6c5b4a3f2e1d0c",
			},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: set, UID: types.UID("5b1c2d3e-4f50-4a6b-8c7d-9e0f1a2b3c4d"), Controller: &yes, BlockOwnerDeletion: &yes}},
		},
		Spec: corev1.PodSpec{
			NodeName: node, Hostname: name, Subdomain: set, ServiceAccountName: "default", RestartPolicy: corev1.RestartPolicyAlways,
			Containers: []corev1.Container{main, exporter}, DNSPolicy: corev1.DNSClusterFirst, SchedulerName: "default-scheduler",
			Tolerations: []corev1.Toleration{
				{Key: "node.kubernetes.io/not-ready", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr(int64(300))},
				{Key: "node.kubernetes.io/unreachable", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr(int64(300))},
			},
			Volumes: []corev1.Volume{
				{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data-" + name}}},
				{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: set + "-config"}}}},
				{Name: "kube-api-access", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
					{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: &token}},
					{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"}, Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
					{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{{Path: "namespace", FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.namespace"}}}}},
				}}}},
			},
		},
	}
}

// ScalePodRunning is what the kubelet reports for a running ScalePod.
func ScalePodRunning(p *corev1.Pod, ip string) {
	now := metav1.Now()
	p.Status = corev1.PodStatus{
		Phase: corev1.PodRunning, HostIP: "192.0.2.10", HostIPs: []corev1.HostIP{{IP: "192.0.2.10"}},
		PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}}, StartTime: &now, QOSClass: corev1.PodQOSBurstable,
	}
	for _, t := range []corev1.PodConditionType{"PodReadyToStartContainers", corev1.PodInitialized, corev1.PodReady, corev1.ContainersReady, corev1.PodScheduled} {
		p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: t, Status: corev1.ConditionTrue, LastTransitionTime: now})
	}
	for _, c := range p.Spec.Containers {
		p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{
			Name: c.Name, Image: c.Image, Ready: true, Started: ptr(true),
			ImageID:     c.Image + "@sha256:9b2a0c1d8e7f6a5b4c3d2e1f0a9b8c7d6e5f4a3b2c1d0e9f8a7b6c5d4e3f2a1b",
			ContainerID: "containerd://" + NewContainerID(), State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}},
		})
	}
}

// CreateScalePods creates n ScalePods named prefix-<i> in the env's
// namespace on its node, and reports them running as the kubelet would.
func (e *Env) CreateScalePods(c *Cluster, prefix string, n int) ([]*corev1.Pod, error) {
	out := make([]*corev1.Pod, n)
	err := parallel(context.Background(), n, func(ctx context.Context, i int) error {
		p, err := c.kube.CoreV1().Pods(e.Namespace).Create(ctx, ScalePod(e.Namespace, prefix+"-"+strconv.Itoa(i), e.Node), metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("pod %s-%d: %w", prefix, i, err)
		}
		ScalePodRunning(p, fmt.Sprintf("198.51.%d.%d", 100+i/250, 1+i%250))
		if out[i], err = c.kube.CoreV1().Pods(e.Namespace).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("pod %s status: %w", p.Name, err)
		}
		return nil
	})
	return out, err
}

func ptr[T any](v T) *T { return &v }
