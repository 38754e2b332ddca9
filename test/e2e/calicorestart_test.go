package e2e

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/capo-net/capo/pkg/reserve"
	"github.com/capo-net/capo/test/testbed"
)

// calico-node's pod is replaced on an opted-in node whose pool is full of
// selected members: from the old pod's termination on, the agent holds
// every member's address. So a member torn down in the moment install-cni
// has written Calico's own conflist (plain calico-ipam frees its address)
// is never free and unreserved, and a pod started in that moment cannot
// take it. Once the new calico-node pod is initialized and capo is back
// in the chain, the holds of the members still running go; the torn-down
// member's stays, its teardown's reservation. (TestNodeOptInDrivesInstallation
// is the control: without calico-node's pod in sight, the same teardown
// leaves the address free until the sweep.)
func TestCalicoNodeReplacedHoldsSelectedAddresses(t *testing.T) {
	ctx := context.Background()
	env, n, a := calicoNodeBed(t)
	var members []*testbed.Sandbox
	for i := range 8 { // the /29's every address
		sb := env.NewDiskSandbox(env.CreatePod(fmt.Sprintf("db-%d", i), testbed.StatefulPod("db")), n)
		if err := sb.Add(ctx); err != nil {
			t.Fatal(err)
		}
		env.MarkRunning(sb)
		members = append(members, sb)
	}

	env.DeletePod("calico-node-a", 30) // the DaemonSet replaces it: it terminates first
	eventually(t, 10*time.Second, "every member's address held", func() bool {
		for _, m := range members {
			if !held(env, m.IP()) {
				return false
			}
		}
		return true
	})
	a.WaitMetric(1, "capo_agent_cni_rewrite_window")

	// install-cni writes Calico's own conflist; the runtime reads it for a
	// teardown and a new pod before the agent puts capo back.
	n.CalicoNodeRewrites(env)
	gone := members[1]
	if err := gone.DelWith(ctx, n.Original); err != nil {
		t.Fatal(err)
	}
	if !held(env, gone.IP()) {
		t.Fatalf("%s freed by plain calico-ipam and not reserved", gone.IP())
	}
	next := env.NewSandbox(env.CreatePod("web-0"), n.Original)
	if err := next.Add(ctx); err == nil {
		t.Fatalf("a pod started in the window got %s from a pool whose only free address is db-1's held %s", next.IP(), gone.IP())
	}

	env.DeletePod("calico-node-a", 0)
	calicoNode(t, env, "calico-node-b", false) // its install-cni yet to run
	time.Sleep(2 * time.Second)
	if !held(env, members[0].IP()) {
		t.Fatal("a hold let go while calico-node's new pod is not initialized")
	}
	calicoNode(t, env, "calico-node-b", true)
	eventually(t, 15*time.Second, "the running members' holds let go, db-1's kept", func() bool {
		for _, m := range members {
			if held(env, m.IP()) != (m == gone) {
				return false
			}
		}
		return true
	})
	a.WaitMetric(0, "capo_agent_cni_rewrite_window")
	a.WaitMetric(7, "capo_agent_cni_rewrite_holds_total", `result="released"`)
}

// calicoNodeBed is an opted-in node (a /29, ipReserveTime 1h) whose
// agent manages its CNI chain, capo installed, and calico-node-a running
// and initialized on it.
func calicoNodeBed(t *testing.T) (*testbed.Env, *testbed.NodeCNI, *testbed.Agent) {
	t.Helper()
	env := bed.NewEnv(t, testbed.Kubernetes, testbed.EnvOptions{PoolPrefix: 29, NoAgent: true})
	env.EnableNamespace()
	env.SetConfig(configWith("ipReserveTime: 1h\n"))
	n := env.SetupNodeCNI()
	_, agentPod := env.AgentDaemonSet()
	env.OptInNode()
	a := env.StartAgentWith(testbed.AgentOptions{ManageCNI: n, PodName: agentPod})
	a.WaitMetric(1, "capo_agent_cni_installed")
	calicoNode(t, env, "calico-node-a", true)
	return env, n, a
}

// calicoNode creates (or updates) a calico-node pod on the env's node,
// running, its init containers run or not.
func calicoNode(t *testing.T, env *testbed.Env, name string, initialized bool) {
	t.Helper()
	ctx := context.Background()
	p, err := env.Kube.CoreV1().Pods(env.Namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		p = env.CreatePod(name, testbed.WithLabels(map[string]string{"k8s-app": "calico-node"}))
	}
	status := corev1.ConditionFalse
	if p.Status.Phase = corev1.PodPending; initialized {
		status, p.Status.Phase = corev1.ConditionTrue, corev1.PodRunning
	}
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodInitialized, Status: status, LastTransitionTime: metav1.Now()}}
	if _, err := env.Kube.CoreV1().Pods(env.Namespace).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// calico-node's pod is replaced on an opted-in node while its agent is
// away (restarting, or crash-looping on an API server out of reach): the
// controller holds the node's running members' addresses in the agent's
// place. So a member torn down through the conflist install-cni wrote
// keeps its address reserved, though plain calico-ipam freed it and the
// controller never saw the member go. The agent, back, puts capo in the
// chain again and lets go of the running member's hold; the torn-down
// member's stays, its teardown's reservation.
func TestCalicoNodeReplacedWhileTheAgentIsAwayIsHeldByTheController(t *testing.T) {
	ctx := context.Background()
	env, n, a := calicoNodeBed(t)
	c := env.StartController("c1")
	var members []*testbed.Sandbox
	for i := range 2 {
		sb := env.NewDiskSandbox(env.CreatePod(fmt.Sprintf("db-%d", i), testbed.StatefulPod("db")), n)
		if err := sb.Add(ctx); err != nil {
			t.Fatal(err)
		}
		env.MarkRunning(sb)
		members = append(members, sb)
	}
	a.Stop()
	c.WaitMetricAtLeast(1, "capo_controller_agents_not_ready")
	env.DeletePod("calico-node-a", 30) // the DaemonSet replaces it: it terminates first
	eventually(t, 10*time.Second, "every member's address held by the controller", func() bool {
		for _, m := range members {
			if e, ok := env.Reservations()[m.IP()]; !ok || e.Reason != reserve.ReasonCNIRewrite || e.Pod != m.Pod.Name {
				return false
			}
		}
		return true
	})

	n.CalicoNodeRewrites(env)
	gone := members[1]
	if err := gone.DelWith(ctx, n.Original); err != nil {
		t.Fatal(err)
	}
	if env.Allocated(net.ParseIP(gone.IP())) {
		t.Fatalf("%s still allocated: the DEL did not run through plain calico-ipam", gone.IP())
	}
	if !held(env, gone.IP()) {
		t.Fatalf("%s freed by plain calico-ipam and not reserved", gone.IP())
	}

	env.DeletePod("calico-node-a", 0)
	calicoNode(t, env, "calico-node-b", true)
	a = a.StartAgain()
	a.WaitMetric(1, "capo_agent_cni_installed")
	eventually(t, 15*time.Second, "the running member's hold let go, the torn-down member's kept", func() bool {
		return !held(env, members[0].IP()) && held(env, gone.IP())
	})
}
