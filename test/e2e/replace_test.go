package e2e

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/capo-net/capo/test/testbed"
)

// A DaemonSet re-created under the same name (helm upgrade --force,
// kubectl replace --force, a GitOps replace) is not an uninstall: the
// stopping agent leaves capo in the chain and the ADD records in place, so
// a teardown before the new agent starts is journaled, its address kept,
// and the new agent reserves it. It used to restore Calico's chain and
// delete the records: such a teardown was released unreserved.
func TestDaemonSetReplacedUnderTheSameName(t *testing.T) {
	ctx := context.Background()
	env := bed.NewEnv(t, testbed.Kubernetes, testbed.EnvOptions{NoAgent: true})
	env.EnableNamespace()
	n := env.SetupNodeCNI()
	set, podName := env.AgentDaemonSet()
	a := env.StartAgentWith(testbed.AgentOptions{ManageCNI: n, PodName: podName})
	env.OptInNode()
	a.WaitMetric(1, "capo_agent_cni_installed")
	sb := env.NewDiskSandbox(env.CreatePod("db-0", testbed.StatefulPod("db")), n)
	if err := sb.Add(ctx); err != nil {
		t.Fatal(err)
	}

	sets := env.Kube.AppsV1().DaemonSets(env.Namespace)
	if err := sets.Delete(ctx, set.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	again := set.DeepCopy()
	again.UID, again.ResourceVersion = "", ""
	time.Sleep(500 * time.Millisecond) // the old agent sees its DaemonSet go
	if _, err := sets.Create(ctx, again, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	a.Stop()
	if !installed(t, n) {
		t.Fatalf("a DaemonSet re-created under the same name was taken for an uninstall: capo left the chain\n%s", a.Log())
	}
	if recs, _ := env.Journal().AddrRecords(); len(recs) != 1 {
		t.Fatalf("%d ADD records after the replace, want 1", len(recs))
	}

	// A teardown before the new agent starts: journaled, address kept.
	if err := sb.Del(ctx); err != nil {
		t.Fatal(err)
	}
	if !env.Allocated(sb.IPs[0]) {
		t.Fatalf("%s released with no agent and no reservation", sb.IP())
	}
	env.StartAgentWith(testbed.AgentOptions{ManageCNI: n, PodName: podName})
	eventually(t, 15*time.Second, "the new agent reserving the gap's teardown", func() bool { return held(env, sb.IP()) })
}
