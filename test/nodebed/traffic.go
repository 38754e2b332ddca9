package nodebed

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// EchoPort is where echo servers listen in their pods.
const EchoPort = 8080

// Echo is an echo server's memory behaviour: AllocMiB held by the member
// named AllocOn, far above its request, makes it the kubelet's first
// eviction victim under memory pressure.
type Echo struct {
	AllocMiB int
	AllocOn  string
	Node     string // the node its pods run on; any when empty
	// Tolerations replace the defaults the API server gives (300 s for an
	// unreachable or not-ready node): a short one has the taint eviction
	// move a lost node's member soon.
	Tolerations []corev1.Toleration
}

// EchoStatefulSet creates a StatefulSet of echo servers: each answers a
// connection with its pod's name and UID. capo's default selector picks
// its pods in a selected namespace.
func (b *Bed) EchoStatefulSet(t testing.TB, ns, name string, replicas int32, e Echo) *appsv1.StatefulSet {
	t.Helper()
	labels := map[string]string{"app": name}
	grace := int64(5)
	spec := corev1.PodSpec{
		TerminationGracePeriodSeconds: &grace,
		Containers: []corev1.Container{{
			Name: "echo", Image: EchoImage, ImagePullPolicy: corev1.PullNever,
			Args: []string{"-serve=:" + strconv.Itoa(EchoPort), "-alloc-mib=" + strconv.Itoa(e.AllocMiB), "-alloc-on=" + e.AllocOn},
			Env:  []corev1.EnvVar{{Name: "POD_UID", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.uid"}}}},
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceMemory: resource.MustParse("16Mi"), corev1.ResourceCPU: resource.MustParse("1m"),
			}},
		}},
		Tolerations: e.Tolerations,
	}
	if e.Node != "" {
		spec.NodeSelector = map[string]string{"kubernetes.io/hostname": e.Node}
	}
	set := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: appsv1.StatefulSetSpec{
			Replicas: &replicas, Selector: &metav1.LabelSelector{MatchLabels: labels},
			PodManagementPolicy: appsv1.ParallelPodManagement,
			Template:            corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: spec},
		},
	}
	out, err := b.Kube.AppsV1().StatefulSets(ns).Create(context.Background(), set, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// EchoClient runs a bare client pod (capo does not select it) and waits
// until it runs. With a target it dials it every 100ms from the start and
// logs each outcome (ProbeLog reads them); without, it idles for Dial.
func (b *Bed) EchoClient(t testing.TB, ns, name, target string) *corev1.Pod {
	t.Helper()
	return b.EchoClientOn(t, ns, name, "", target)
}

// EchoClientOn is EchoClient on the named node.
func (b *Bed) EchoClientOn(t testing.TB, ns, name, node, target string) *corev1.Pod {
	t.Helper()
	grace := int64(1)
	var args []string
	if target != "" {
		args = []string{"-probe=" + target, "-every=100ms", "-timeout=500ms"}
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"role": "client"}},
		Spec: corev1.PodSpec{
			NodeName:                      node,
			TerminationGracePeriodSeconds: &grace,
			PriorityClassName:             HighPriority,
			Containers: []corev1.Container{{
				Name: "client", Image: EchoImage, ImagePullPolicy: corev1.PullNever, Args: args,
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceMemory: resource.MustParse("16Mi"), corev1.ResourceCPU: resource.MustParse("1m"),
				}},
			}},
		},
	}
	if err := b.EnsurePriorityClasses(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Kube.CoreV1().Pods(ns).Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var out *corev1.Pod
	Eventually(t, 2*time.Minute, "client pod "+name+" running", func() error {
		out = b.Pod(ns, name)
		if out == nil || out.Status.Phase != corev1.PodRunning || out.Status.PodIP == "" {
			return fmt.Errorf("client %s not running yet", name)
		}
		return nil
	})
	return out
}

// EchoAddr is the address a client dials for pod's echo server.
func EchoAddr(pod *corev1.Pod) string {
	return net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(EchoPort))
}

// Dial connects once from inside the client pod (kubectl exec) and returns
// the answer: the name and UID of the pod that holds the address.
func (b *Bed) Dial(ctx context.Context, ns, client, target string) (Answer, error) {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	out, err := b.Kubectl(ctx, "-n", ns, "exec", client, "--", "/echo", "-dial="+target, "-timeout=2s")
	if err != nil {
		return Answer{}, err
	}
	return parseAnswer(strings.TrimSpace(out))
}

// Answer is what an echo server said: who it is.
type Answer struct {
	Pod, UID string
	At       time.Time // when the client got it (probes only)
}

func parseAnswer(s string) (Answer, error) {
	f := strings.Fields(s)
	if len(f) != 2 {
		return Answer{}, fmt.Errorf("an echo answer is <pod> <uid>, got %q", s)
	}
	return Answer{Pod: f[0], UID: f[1]}, nil
}

// Probe is a probing client's log: every answer it got, and how many
// attempts failed.
type Probe struct {
	Answers  []Answer
	Failures int
}

// ProbeLog reads a probing client's log.
func (b *Bed) ProbeLog(ctx context.Context, ns, client string) (Probe, error) {
	raw, err := b.Kube.CoreV1().Pods(ns).GetLogs(client, &corev1.PodLogOptions{}).DoRaw(ctx)
	if err != nil {
		return Probe{}, fmt.Errorf("reading %s's log: %w", client, err)
	}
	var p Probe
	for _, line := range strings.Split(string(raw), "\n") {
		f := strings.SplitN(line, " ", 3)
		if len(f) < 3 {
			continue
		}
		ms, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			continue
		}
		switch f[1] {
		case "fail":
			p.Failures++
		case "answer":
			a, err := parseAnswer(f[2])
			if err != nil {
				return Probe{}, fmt.Errorf("%s's log: %w", client, err)
			}
			a.At = time.UnixMilli(ms)
			p.Answers = append(p.Answers, a)
		}
	}
	return p, nil
}
