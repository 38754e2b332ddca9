package node

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/capo-net/capo/test/nodebed"
)

// The pod's pause process killed: the kubelet sees the sandbox die and
// makes a new one under the same pod (SandboxChanged), with a CNI DEL of
// the old sandbox and an ADD of the new. No API call, no eviction, the pod
// keeps running: capo reserves the old address on the DEL and, the pod
// being the same (same UID), gives it back on the ADD (returnAddress
// sameNode, the default); the reservation then ends.
func TestSandboxRecreationKeepsTheAddress(t *testing.T) {
	ctx := context.Background()
	pool, cidr := bed.NewPool(t, 29)
	ns := bed.Namespace(t, "sandbox", pool, true)
	bed.OptIn(t)
	bed.StatefulSet(t, ns, "zk", 1, nodebed.Workload{})
	pod := bed.WaitRunning(t, ns, "app=zk", 1)["zk-0"]
	oldIP, oldSandbox := pod.Status.PodIP, pod.Annotations["cni.projectcalico.org/containerID"]

	pid := pausePid(t, oldSandbox)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill -9 %d (the pause process of %s): %v", pid, pod.Name, err)
	}
	nodebed.Eventually(t, 60*time.Second, "a new sandbox under the same pod", func() error {
		now := bed.Pod(ns, "zk-0")
		if now == nil || now.UID != pod.UID {
			return fmt.Errorf("zk-0 is not the same pod any more: the sandbox must be re-created under it")
		}
		if now.Annotations["cni.projectcalico.org/containerID"] == oldSandbox || now.Status.PodIP == "" {
			return fmt.Errorf("zk-0 still on sandbox %.12s, address %q", now.Annotations["cni.projectcalico.org/containerID"], now.Status.PodIP)
		}
		pod = now
		return nil
	})
	if pod.Status.PodIP != oldIP {
		t.Fatalf("the new sandbox got %s, want the pod's own %s back", pod.Status.PodIP, oldIP)
	}
	nodebed.Eventually(t, 30*time.Second, "the address allocated to the new sandbox and no longer reserved", func() error {
		return bed.AllocatedTo(ctx, cidr, oldIP, pod)
	})
	// Events are recorded asynchronously, after the reservation has ended.
	nodebed.Eventually(t, 15*time.Second, "SandboxChanged and AddressReturned events on zk-0", func() error {
		var changed, returned bool
		evs := bed.PodEvents(ns, string(pod.UID))
		for _, ev := range evs {
			changed = changed || strings.HasPrefix(ev, "SandboxChanged")
			returned = returned || strings.HasPrefix(ev, "AddressReturned")
		}
		if !changed || !returned {
			return fmt.Errorf("events %v", evs)
		}
		return nil
	})
}

// pausePid is the host pid of a sandbox's pause process, from containerd.
func pausePid(t *testing.T, sandbox string) int {
	t.Helper()
	out, err := nodebed.Ctr("tasks", "ls")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 && f[0] == sandbox {
			pid, err := strconv.Atoi(f[1])
			if err != nil {
				t.Fatal(err)
			}
			return pid
		}
	}
	t.Fatalf("no task for sandbox %s in containerd:\n%s", sandbox, out)
	return 0
}
