package node

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/capo-net/capo/test/nodebed"
)

// The agent pod deleted while a selected pod is being torn down: the DEL
// finds no agent, capo-ipam journals it and returns without releasing, so
// the teardown finishes (the pod goes away) and the address stays
// allocated. The DaemonSet's new agent pod replays the journal: reserve,
// then release.
//
// The controller-manager is stopped for the middle of the test so the
// DaemonSet cannot bring the agent back before the DEL: the window an
// agent restart leaves open, held open on purpose.
func TestAgentGoneMidTeardownJournalsAndReplays(t *testing.T) {
	ctx := context.Background()
	pool, cidr := bed.NewPool(t, 29)
	ns := bed.Namespace(t, "agentgone", pool, true)
	bed.OptIn(t)
	// The container takes 10 s to stop: the agent is gone by its DEL. es-0's
	// successor, started when the controller-manager is back, does not take
	// the address back: what is checked is the replay's reservation.
	bed.StatefulSet(t, ns, "es", 1, nodebed.Workload{Grace: 10 * time.Second, NoReturn: true})
	pod := bed.WaitRunning(t, ns, "app=es", 1)["es-0"]
	ip, sandbox := pod.Status.PodIP, pod.Annotations["cni.projectcalico.org/containerID"]
	agent, err := bed.AgentPod(ctx)
	if err != nil {
		t.Fatal(err)
	}

	bed.StopControllerManager()
	t.Cleanup(func() {
		if err := bed.StartControllerManager(); err != nil {
			t.Error(err)
		}
	})
	if err := bed.Kube.CoreV1().Pods(ns).Delete(ctx, pod.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := bed.Kubectl(ctx, "-n", nodebed.Namespace, "delete", "pod", agent.Name, "--timeout=60s"); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	nodebed.Eventually(t, 60*time.Second, "es-0's teardown to finish without the agent", func() error {
		if p := bed.Pod(ns, pod.Name); p != nil {
			return fmt.Errorf("es-0 still there (%s)", p.Status.Phase)
		}
		return nil
	})
	t.Logf("es-0 gone %s after the agent", time.Since(start).Round(100*time.Millisecond))
	if n := pendingFor(t, sandbox); n != 1 {
		t.Fatalf("%d journal records for es-0's sandbox, want 1: the DEL did not journal", n)
	}
	allocs, err := bed.Allocations(ctx, cidr)
	if err != nil {
		t.Fatal(err)
	}
	if a := allocs[ip]; a.Handle != "k8s-pod-network."+sandbox {
		t.Fatalf("with the agent away, %s must stay allocated to es-0's sandbox; Calico IPAM has %+v", ip, a)
	}

	if err := bed.StartControllerManager(); err != nil {
		t.Fatal(err)
	}
	nodebed.Eventually(t, 90*time.Second, "the new agent to replay the journal: reserved, then released", func() error {
		if n := pendingFor(t, sandbox); n != 0 {
			return fmt.Errorf("%d journal records left", n)
		}
		return bed.Held(ctx, cidr, ip, pod)
	})
}

// pendingFor counts the journal's records for a sandbox.
func pendingFor(t *testing.T, sandbox string) int {
	t.Helper()
	entries, err := nodebed.StateDir.Pending()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range entries {
		if e.Record != nil && e.Record.Request.ContainerID == sandbox {
			n++
		}
	}
	return n
}
