package nodebed

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"

	"github.com/capo-net/capo/pkg/wire"
)

// WaitCapoReady waits until the agent DaemonSet runs tag on the node, Ready,
// and both controller replicas are available.
func (b *Bed) WaitCapoReady(ctx context.Context, tag string) error {
	want := CapoRepository + ":" + tag
	return Poll(ctx, 120*time.Second, func() error {
		ds, err := b.Kube.AppsV1().DaemonSets(Namespace).Get(ctx, "capo-agent", metav1.GetOptions{})
		if err != nil {
			return err
		}
		st := ds.Status
		if ds.Spec.Template.Spec.Containers[0].Image != want || st.ObservedGeneration < ds.Generation ||
			st.UpdatedNumberScheduled != 1 || st.NumberReady != 1 || st.NumberUnavailable != 0 {
			return fmt.Errorf("agent DaemonSet on %s: %d updated, %d ready (want 1 of %s)", ds.Spec.Template.Spec.Containers[0].Image, st.UpdatedNumberScheduled, st.NumberReady, want)
		}
		d, err := b.Kube.AppsV1().Deployments(Namespace).Get(ctx, "capo-controller", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if d.Status.AvailableReplicas != *d.Spec.Replicas || d.Status.UpdatedReplicas != *d.Spec.Replicas {
			return fmt.Errorf("controller Deployment: %d of %d available", d.Status.AvailableReplicas, *d.Spec.Replicas)
		}
		return nil
	})
}

// WaitCapoGone waits until no capo pod is left on the node.
func (b *Bed) WaitCapoGone(ctx context.Context) error {
	return Poll(ctx, 90*time.Second, func() error {
		pods, err := b.Kube.CoreV1().Pods(Namespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=capo"})
		if err != nil {
			return err
		}
		if n := len(pods.Items); n > 0 {
			return fmt.Errorf("%d capo pods left, e.g. %s (%s)", n, pods.Items[0].Name, pods.Items[0].Status.Phase)
		}
		return nil
	})
}

// AgentPod is the agent DaemonSet's running pod on the node.
func (b *Bed) AgentPod(ctx context.Context) (*corev1.Pod, error) {
	pods, err := b.Kube.CoreV1().Pods(Namespace).List(ctx, metav1.ListOptions{LabelSelector: AgentSelector})
	if err != nil {
		return nil, err
	}
	for i := range pods.Items {
		if p := &pods.Items[i]; p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning {
			return p, nil
		}
	}
	return nil, fmt.Errorf("no running capo-agent pod in %s (%d pods)", Namespace, len(pods.Items))
}

// AgentMetrics is the node's agent's /metrics (it serves on the host
// network, on the chart's metrics port).
func AgentMetrics() (string, error) {
	resp, err := http.Get("http://127.0.0.1:9467/metrics")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// AgentStatus is the HTTP status the node's agent answers at addr+path:
// its probes on the chart's loopback health port, its metrics port.
func AgentStatus(addr, path string) (int, error) {
	resp, err := http.Get("http://" + addr + path)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// AgentRoot is the running agent container's root as the host sees it
// (/proc/<pid>/root): what the agent can reach of the host.
func AgentRoot() (string, error) {
	pid, err := AgentPID()
	if err != nil {
		return "", err
	}
	return filepath.Join("/proc", strconv.Itoa(pid), "root"), nil
}

// AgentPID is the running agent container's process, as the host sees it.
func AgentPID() (int, error) {
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err == nil && strings.HasPrefix(string(b), "/usr/local/bin/capo-agent\x00") {
			return strconv.Atoi(filepath.Base(filepath.Dir(p)))
		}
	}
	return 0, fmt.Errorf("no capo-agent process on the node")
}

// CNIState is the node's CNI as the runtime sees it.
type CNIState struct {
	Conflist      []byte
	CapoInstalled bool     // capo-ipam and its helper both in the CNI bin dir
	CapoFiles     []string // those of the two that are there
}

// capoBinaries are what capo puts in the CNI bin dir.
var capoBinaries = []string{"capo-ipam", wire.KubeHelper}

// ReadCNI reads the conflist and looks for capo's binaries in the bin dir.
func ReadCNI() (CNIState, error) {
	list, err := os.ReadFile(Conflist)
	if err != nil {
		return CNIState{}, err
	}
	st := CNIState{Conflist: list}
	for _, name := range capoBinaries {
		if _, err := os.Stat(filepath.Join(CNIBinDir, name)); err == nil {
			st.CapoFiles = append(st.CapoFiles, name)
		}
	}
	st.CapoInstalled = len(st.CapoFiles) == len(capoBinaries)
	return st, nil
}

// CalicoOnly reports whether the node's CNI is Calico's own again: the
// conflist byte for byte as install-cni wrote it, and no capo-ipam.
func (b *Bed) CalicoOnly() error {
	st, err := ReadCNI()
	if err != nil {
		return err
	}
	if !bytes.Equal(st.Conflist, b.CalicoConflist) {
		return fmt.Errorf("%s is not Calico's own:\n%s", Conflist, st.Conflist)
	}
	if len(st.CapoFiles) > 0 {
		return fmt.Errorf("%v still in %s", st.CapoFiles, CNIBinDir)
	}
	return nil
}

// RestoreCalicoCNI puts Calico's chain back by hand, as an operator would
// after an uninstall that left capo in it, so later tests start clean.
func (b *Bed) RestoreCalicoCNI() error {
	if err := os.WriteFile(Conflist, b.CalicoConflist, 0o644); err != nil {
		return err
	}
	for _, name := range capoBinaries {
		if err := os.Remove(filepath.Join(CNIBinDir, name)); err != nil && !os.IsNotExist(err) {
			return err
		}
	}
	return nil
}

// deleteObject deletes one rendered object (background propagation, as
// Helm does); already gone is fine.
func (b *Bed) deleteObject(ctx context.Context, o *unstructured.Unstructured) error {
	dyn, err := dynamic.NewForConfig(b.REST)
	if err != nil {
		return err
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(b.Kube.Discovery()))
	gvk := o.GroupVersionKind()
	m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return fmt.Errorf("%s %s: %w", gvk.Kind, o.GetName(), err)
	}
	var ri dynamic.ResourceInterface = dyn.Resource(m.Resource)
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		ri = dyn.Resource(m.Resource).Namespace(o.GetNamespace())
	}
	bg := metav1.DeletePropagationBackground
	if err := ri.Delete(ctx, o.GetName(), metav1.DeleteOptions{PropagationPolicy: &bg}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting %s %s: %w", gvk.Kind, o.GetName(), err)
	}
	return nil
}

// Diagnose is what a failing test prints: capo's pods, their recent logs
// (also of the previous container), and the node's recent events.
func (b *Bed) Diagnose(ctx context.Context) string {
	var out string
	for _, args := range [][]string{
		{"get", "pods", "-A", "-o", "wide"},
		{"logs", "-n", Namespace, "-l", AgentSelector, "--tail=40", "--prefix"},
		{"logs", "-n", Namespace, "-l", AgentSelector, "--tail=20", "--prefix", "--previous"},
		{"logs", "-n", Namespace, "-l", "app.kubernetes.io/component=controller", "--tail=20", "--prefix"},
		{"get", "events", "-A", "--sort-by=.lastTimestamp"},
	} {
		o, err := b.Kubectl(ctx, args...)
		if err != nil && o == "" {
			o = err.Error()
		}
		out += "$ kubectl " + strings.Join(args, " ") + "\n" + tail(o, 60) + "\n"
	}
	return out
}

func tail(s string, lines int) string {
	l := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(l) > lines {
		l = l[len(l)-lines:]
	}
	return strings.Join(l, "\n")
}
