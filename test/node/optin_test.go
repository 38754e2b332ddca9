package node

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/capo-net/capo/test/nodebed"
)

// Opting the node in by annotation makes the agent pod put capo-ipam (the
// one from its image) into containerd's CNI bin dir and wrap Calico's
// conflist; the next pod's ADD goes through it and Calico IPAM allocates
// for the pod's sandbox. Opting out gives Calico's file back byte for byte
// and removes the binary.
func TestOptInInstallsOptOutRestores(t *testing.T) {
	ctx := context.Background()
	if err := bed.CalicoOnly(); err != nil {
		t.Fatalf("before opt-in the chain must be Calico's own: %v", err)
	}
	pool, cidr := bed.NewPool(t, 29)
	ns := bed.Namespace(t, "optin", pool, true)
	bed.OptIn(t)

	fromImage, err := os.ReadFile(filepath.Join(bed.ImagesDir, "capo", runtime.GOARCH, "capo-ipam"))
	if err != nil {
		t.Fatal(err)
	}
	installed, err := os.ReadFile(filepath.Join(nodebed.CNIBinDir, "capo-ipam"))
	if err != nil || !bytes.Equal(installed, fromImage) {
		t.Fatalf("%s/capo-ipam is not the image's capo-ipam (%v)", nodebed.CNIBinDir, err)
	}

	// The chart's probes are on the node's loopback, apart from /metrics.
	for _, c := range []struct {
		addr, path string
		want       int
	}{{"127.0.0.1:9469", "/livez", 200}, {"127.0.0.1:9469", "/healthz", 200}, {"127.0.0.1:9467", "/readyz", 404}, {"127.0.0.1:9467", "/metrics", 200}} {
		if got, err := nodebed.AgentStatus(c.addr, c.path); err != nil || got != c.want {
			t.Errorf("agent %s%s: %d (%v), want %d", c.addr, c.path, got, err, c.want)
		}
	}

	// Of Calico's run directory the agent sees only the IPAM lock, the
	// host's very file, so calico-ipam's releases it replays share it.
	root, err := nodebed.AgentRoot()
	if err != nil {
		t.Fatal(err)
	}
	bird := "/var/run/calico/bird.ctl" // a stand-in for BIRD's socket, beside the lock on the host
	if err := os.WriteFile(bird, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	defer os.Remove(bird)
	if names := dirNames(t, filepath.Join(root, "/var/run/calico")); len(names) != 1 || names[0] != "ipam.lock" {
		t.Errorf("the agent sees %v in /var/run/calico, want [ipam.lock]", names)
	}
	if a, b := inode(t, filepath.Join(root, "/var/run/calico/ipam.lock")), inode(t, "/var/run/calico/ipam.lock"); a != b {
		t.Errorf("the agent's ipam.lock is not the host's (inode %d, host %d)", a, b)
	}

	bed.StatefulSet(t, ns, "db", 1, nodebed.Workload{})
	pod := bed.WaitRunning(t, ns, "app=db", 1)["db-0"]
	if err := bed.AllocatedTo(ctx, cidr, pod.Status.PodIP, pod); err != nil {
		t.Fatal(err)
	}
	sandbox := pod.Annotations["cni.projectcalico.org/containerID"]
	if got := nodebed.StateDir.Addrs("k8s-pod-network", sandbox, "eth0"); len(got) != 1 || got[0] != pod.Status.PodIP {
		t.Fatalf("capo-ipam recorded %v for the pod's ADD, want [%s]: the ADD did not go through capo-ipam", got, pod.Status.PodIP)
	}

	bed.OptOut(t)
	nodebed.Eventually(t, 30*time.Second, "Calico's own chain back after opt-out", bed.CalicoOnly)
}

func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

func inode(t *testing.T, path string) uint64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*syscall.Stat_t).Ino
}
