package nodebed

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Namespace creates a namespace whose pods take addresses from pool (the
// calico annotation, which capo-ipam honours too), labelled for capo's
// selection when selected. After t it is deleted, and the test waits until
// its pods are gone so the next test finds the node quiet.
func (b *Bed) Namespace(t testing.TB, name, pool string, selected bool) string {
	t.Helper()
	ctx := context.Background()
	pools, _ := json.Marshal([]string{pool})
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name:        name,
		Annotations: map[string]string{"cni.projectcalico.org/ipv4pools": string(pools)},
	}}
	if selected {
		ns.Labels = map[string]string{"ip-reserve": "enabled"}
	}
	if _, err := b.Kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := b.Kube.CoreV1().Namespaces().Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Errorf("deleting namespace %s: %v", name, err)
			return
		}
		err := Poll(ctx, 3*time.Minute, func() error {
			_, err := b.Kube.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return nil
			}
			return fmt.Errorf("namespace %s still there (%v)", name, err)
		})
		if err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	return name
}

// Workload is how a test pod behaves: the sleeper's flags, its memory
// request (Burstable: the kubelet ranks it for eviction; a BestEffort pod
// would be rejected at admission instead), its priority class.
type Workload struct {
	ExitOnTerm    int           // exit status on SIGTERM: non-zero leaves an evicted pod Failed, 0 Succeeded
	Grace         time.Duration // time the container takes to exit after SIGTERM
	AllocMiB      int           // memory held by the pod named AllocOn
	AllocOn       string
	Request       string // memory request, default 16Mi
	PriorityClass string
	NoReturn      bool // the pods opt out of getting their addresses back (capo.io/return-address: disabled)
}

// meta is the pod template's metadata for w.
func (w Workload) meta(labels map[string]string) metav1.ObjectMeta {
	m := metav1.ObjectMeta{Labels: labels}
	if w.NoReturn {
		m.Annotations = map[string]string{"capo.io/return-address": "disabled"}
	}
	return m
}

// PodSpec is the pod template's spec for w.
func (w Workload) PodSpec() corev1.PodSpec {
	req := w.Request
	if req == "" {
		req = "16Mi"
	}
	grace := int64(w.Grace/time.Second) + 5
	return corev1.PodSpec{
		PriorityClassName:             w.PriorityClass,
		TerminationGracePeriodSeconds: &grace,
		Containers: []corev1.Container{{
			Name: "main", Image: SleeperImage, ImagePullPolicy: corev1.PullNever,
			Args: []string{
				"-exit-on-term=" + strconv.Itoa(w.ExitOnTerm), "-grace=" + w.Grace.String(),
				"-alloc-mib=" + strconv.Itoa(w.AllocMiB), "-alloc-on=" + w.AllocOn,
			},
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceMemory: resource.MustParse(req), corev1.ResourceCPU: resource.MustParse("1m"),
			}},
		}},
	}
}

// StatefulSet creates a StatefulSet of w: capo's default selector picks
// its pods in a selected namespace.
func (b *Bed) StatefulSet(t testing.TB, ns, name string, replicas int32, w Workload) *appsv1.StatefulSet {
	t.Helper()
	labels := map[string]string{"app": name}
	set := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: appsv1.StatefulSetSpec{
			Replicas: &replicas, Selector: &metav1.LabelSelector{MatchLabels: labels},
			PodManagementPolicy: appsv1.ParallelPodManagement,
			Template:            corev1.PodTemplateSpec{ObjectMeta: w.meta(labels), Spec: w.PodSpec()},
		},
	}
	out, err := b.Kube.AppsV1().StatefulSets(ns).Create(context.Background(), set, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// Deployment creates a Deployment of w: pods capo does not select.
func (b *Bed) Deployment(t testing.TB, ns, name string, replicas int32, w Workload) {
	t.Helper()
	labels := map[string]string{"app": name}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas, Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: w.meta(labels), Spec: w.PodSpec()},
		},
	}
	if _, err := b.Kube.AppsV1().Deployments(ns).Create(context.Background(), d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// WaitRunning waits until n pods matching selector in ns run with an
// address, and returns them by name.
func (b *Bed) WaitRunning(t testing.TB, ns, selector string, n int) map[string]*corev1.Pod {
	t.Helper()
	var out map[string]*corev1.Pod
	Eventually(t, 3*time.Minute, fmt.Sprintf("%d running pods %s in %s", n, selector, ns), func() error {
		pods, err := b.Kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return err
		}
		out = map[string]*corev1.Pod{}
		for i := range pods.Items {
			p := &pods.Items[i]
			if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning && p.Status.PodIP != "" {
				out[p.Name] = p
			}
		}
		if len(out) != n {
			return fmt.Errorf("%d running of %d; %s", len(out), n, podSummary(pods.Items))
		}
		return nil
	})
	return out
}

// Pod reads a pod; nil when it does not exist.
func (b *Bed) Pod(ns, name string) *corev1.Pod {
	p, err := b.Kube.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		return nil
	}
	return p
}

// PodEvents are the reasons and messages of the Events about a pod object.
func (b *Bed) PodEvents(ns string, uid string) []string {
	evs, err := b.Kube.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{FieldSelector: "involvedObject.uid=" + uid})
	if err != nil {
		return []string{err.Error()}
	}
	var out []string
	for _, e := range evs.Items {
		out = append(out, e.Reason+": "+e.Message)
	}
	return out
}

func podSummary(pods []corev1.Pod) string {
	s := ""
	for _, p := range pods {
		s += fmt.Sprintf("%s %s %s", p.Name, p.Status.Phase, p.Status.PodIP)
		if p.Spec.NodeName != "" {
			s += " on " + p.Spec.NodeName
		}
		if p.DeletionTimestamp != nil {
			s += " deleting"
		}
		s += "; "
	}
	return s
}

// PodsSummary names the pods of ns that match selector, with their
// phases, addresses and nodes: for a test's error.
func (b *Bed) PodsSummary(ns, selector string) string {
	pods, err := b.Kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return err.Error()
	}
	return podSummary(pods.Items)
}
