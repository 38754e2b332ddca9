package e2e

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/capo-net/capo/test/testbed"
)

// capo uninstalled while a node was down: the node's agent never ran its
// exit (killed, no chain restored) and its pod object went with the
// DaemonSet. capo-ipam keeps journaling while the agent's pod exists and
// for uninstalled_after once it is gone, then releases as plain
// calico-ipam: the node is not stranded, and no DEL fails on the way.
func TestUninstallWithTheNodeDownDoesNotStrandIt(t *testing.T) {
	eachDatastore(t, func(t *testing.T, ds testbed.Datastore) {
		ctx := context.Background()
		env := bed.NewEnv(t, ds, testbed.EnvOptions{PoolPrefix: 28, OptIn: true})
		env.Agent.Stop()
		agentPod := "capo-agent-x" + env.ID
		env.Agent = env.StartAgentWith(testbed.AgentOptions{PodName: agentPod})
		conflist := withUninstalledAfter(t, env.Conflist(testbed.Capo), "2s")
		pods := env.AddPods("kafka", 3, conflist, testbed.StatefulPod("kafka"))
		env.Agent.Kill()
		del := func(i int) {
			t.Helper()
			if err := pods[i].Del(ctx); err != nil {
				t.Fatalf("DEL of %s: %v", pods[i].Pod.Name, err)
			}
		}
		del(0) // the agent's pod still stands: capo is there, away
		// Gone for good: a forced delete, or the kubelet confirming the
		// deletion once the node is back.
		zero := int64(0)
		if err := env.Kube.CoreV1().Pods(env.Namespace).Delete(ctx, agentPod, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
			t.Fatal(err)
		}
		env.OptOutNode() // the proof that capo is not wanted here
		del(1)           // gone, but not for long yet
		for i, kept := range pods[:2] {
			if !env.Allocated(kept.IPs[0]) {
				t.Fatalf("DEL %d released %s while capo was not known to be uninstalled", i, kept.IP())
			}
		}
		time.Sleep(3 * time.Second)
		del(2)
		if env.Allocated(pods[2].IPs[0]) {
			t.Fatalf("%s still allocated: capo-ipam keeps journaling on a node capo was uninstalled from", pods[2].IP())
		}
		if pending, _ := env.Journal().Pending(); len(pending) != 2 {
			t.Fatalf("%d DELs journaled, want the 2 from before capo was known gone", len(pending))
		}
	})
}

func withUninstalledAfter(t *testing.T, conflist []byte, d string) []byte {
	t.Helper()
	var c map[string]any
	if err := json.Unmarshal(conflist, &c); err != nil {
		t.Fatal(err)
	}
	c["plugins"].([]any)[0].(map[string]any)["ipam"].(map[string]any)["uninstalled_after"] = d
	out, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
