package testbed

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/capo-net/capo/pkg/selection"
)

// NodeCNI is a node's own /etc/cni/net.d and /opt/cni/bin, laid out as
// calico-node's install-cni leaves them, for tests of what capo does to them.
type NodeCNI struct {
	ConfDir, BinDir string
	ConfFile        string // 10-calico.conflist
	Original        []byte // what calico-node wrote
}

// SetupNodeCNI writes Calico's conflist (indented, as install-cni writes it)
// and copies calico and calico-ipam into the env's own CNI dirs.
func (e *Env) SetupNodeCNI() *NodeCNI {
	e.T.Helper()
	n := &NodeCNI{ConfDir: filepath.Join(e.Dir, "net.d"), BinDir: filepath.Join(e.Dir, "opt-cni-bin")}
	n.ConfFile = filepath.Join(n.ConfDir, "10-calico.conflist")
	for _, d := range []string{n.ConfDir, n.BinDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			e.T.Fatal(err)
		}
	}
	var buf bytes.Buffer
	if err := json.Indent(&buf, e.Conflist(PlainCalico), "", "  "); err != nil {
		e.T.Fatal(err)
	}
	n.Original = buf.Bytes()
	n.CalicoNodeRewrites(e)
	if err := os.WriteFile(filepath.Join(n.ConfDir, "99-loopback.conf"), []byte(`{"cniVersion":"0.3.1","name":"lo","type":"loopback"}`), 0o644); err != nil {
		e.T.Fatal(err)
	}
	return n
}

// CalicoNodeRewrites does what calico-node's install-cni does on every
// start: writes its conflist in place and copies its binaries again, the
// env's Calico release's (EnvOptions.CalicoRelease).
func (n *NodeCNI) CalicoNodeRewrites(e *Env) {
	e.T.Helper()
	if err := os.WriteFile(n.ConfFile, n.Original, 0o644); err != nil {
		e.T.Fatal(err)
	}
	for _, name := range []string{"calico", "calico-ipam"} {
		if err := copyFile(filepath.Join(e.BinDir, "calico"), filepath.Join(n.BinDir, name), 0o755); err != nil {
			e.T.Fatal(err)
		}
	}
}

// NewDiskSandbox is a sandbox run the way the runtime does on this node:
// with whatever conflist is on disk, from the node's own bin dir.
func (e *Env) NewDiskSandbox(pod *corev1.Pod, n *NodeCNI) *Sandbox {
	e.T.Helper()
	data, err := os.ReadFile(n.ConfFile)
	if err != nil {
		e.T.Fatal(err)
	}
	sb := e.NewSandbox(pod, data)
	sb.cni.Path = []string{n.BinDir}
	return sb
}

// OptOutNode removes the opt-in annotation.
func (e *Env) OptOutNode() {
	e.patch(func(ctx context.Context, p []byte) error {
		_, err := e.Kube.CoreV1().Nodes().Patch(ctx, e.Node, types.MergePatchType, p, metav1.PatchOptions{})
		return err
	}, map[string]any{"metadata": map[string]any{"annotations": map[string]any{selection.NodeAnnotation: nil}}})
}

// AgentDaemonSet creates a DaemonSet object and one pod of it on the env's
// node, as the agent's own identity (no controller runs them here).
func (e *Env) AgentDaemonSet() (ds *appsv1.DaemonSet, podName string) {
	e.T.Helper()
	ctx := context.Background()
	labels := map[string]string{"app": "capo-agent"}
	ds, err := e.Kube.AppsV1().DaemonSets(e.Namespace).Create(ctx, &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: "capo-agent"},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "agent", Image: "registry.invalid/capo:1"}}},
			},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		e.T.Fatal(err)
	}
	yes := true
	pod := e.CreatePod("capo-agent-"+e.ID, WithLabels(labels), func(p *corev1.Pod) {
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: ds.Name, UID: ds.UID, Controller: &yes}}
	})
	return ds, pod.Name
}
