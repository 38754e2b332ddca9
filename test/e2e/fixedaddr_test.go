package e2e

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/capo-net/capo/test/testbed"
)

// Pods with Calico's fixed-address annotations cannot start on an opted-in
// node (the calico plugin refuses them before capo is called). capo says so
// where an operator looks: an Event on the pod, a metric, capo-install check.
func TestFixedAddressPodsAreFlagged(t *testing.T) {
	ctx := context.Background()
	env := bed.NewEnv(t, testbed.Kubernetes, testbed.EnvOptions{OptIn: true})
	n := env.SetupNodeCNI()
	if out, err := exec.Command(bed.Bin.CapoInstall, "install", "--cni-bin-dir="+n.BinDir, "--cni-conf-dir="+n.ConfDir, "--source="+bed.Bin.CapoIPAM).CombinedOutput(); err != nil {
		t.Fatalf("capo-install install: %v\n%s", err, out)
	}
	fixed := env.CreatePod("legacy-0", testbed.WithAnnotations(map[string]string{"cni.projectcalico.org/ipAddrs": `["` + env.Pool.IP.String() + `"]`}))
	err := env.NewDiskSandbox(fixed, n).Add(ctx)
	if err == nil || !strings.Contains(err.Error(), "not compatible with configured IPAM: capo-ipam") {
		t.Fatalf("ADD of a fixed-address pod under capo-ipam: %v (the calico plugin refuses it)", err)
	}
	eventually(t, 10*time.Second, "a Warning Event on the pod", func() bool {
		evs, err := env.Kube.CoreV1().Events(env.Namespace).List(ctx, metav1.ListOptions{FieldSelector: "reason=FixedAddressOnCapoNode,involvedObject.name=legacy-0"})
		return err == nil && len(evs.Items) == 1 && evs.Items[0].Type == "Warning"
	})
	env.Agent.WaitMetric(1, "capo_agent_fixed_address_pods_total")

	cmd := exec.Command(bed.Bin.CapoInstall, "check", "--cni-bin-dir="+n.BinDir, "--cni-conf-dir="+n.ConfDir, "--source="+bed.Bin.CapoIPAM, "--node="+env.Node)
	cmd.Env = []string{"KUBECONFIG=" + bed.Kubeconfig}
	out, err := cmd.CombinedOutput()
	if code := cmd.ProcessState.ExitCode(); code != 1 || !strings.Contains(string(out), env.Namespace+"/legacy-0 (cni.projectcalico.org/ipAddrs)") {
		t.Fatalf("capo-install check: exit %d, %v\n%s", code, err, out)
	}
}

// A node label opts a node in like the annotation (and lets fixed-address
// pods keep off it with node affinity).
func TestNodeLabelOptsIn(t *testing.T) {
	ctx := context.Background()
	env := bed.NewEnv(t, testbed.Etcd, testbed.EnvOptions{})
	env.EnableNamespace()
	p := []byte(`{"metadata":{"labels":{"capo.io/ip-reserve":"enabled"}}}`)
	if _, err := env.Kube.CoreV1().Nodes().Patch(ctx, env.Node, types.MergePatchType, p, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	env.Agent.WaitMetric(1, "capo_agent_node_opted_in")
	sb := env.AddPods("zk", 1, env.Conflist(testbed.Capo), testbed.StatefulPod("zk"))[0]
	if err := sb.Del(ctx); err != nil {
		t.Fatal(err)
	}
	if !held(env, sb.IP()) {
		t.Fatal("a labelled node's selected pod was not reserved")
	}
}
