package testbed

import (
	"fmt"
	"os"
	"os/exec"
	"testing"
)

// ensureNetnsEnv makes the test binary run EnsureNetnsMount and exit:
// TestNetnsMountedBeforeContainerd's child.
const ensureNetnsEnv = "CAPO_TESTBED_ENSURE_NETNS"

func TestMain(m *testing.M) {
	if os.Getenv(ensureNetnsEnv) != "" {
		if err := EnsureNetnsMount(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// A pod's network namespace, mounted as containerd mounts it, can be
// removed after an `ip netns add` of a test bed beside it, once the bed
// made /run/netns a mount point first. Each case runs in a mount
// namespace of its own, over a /run of its own.
func TestNetnsMountedBeforeContainerd(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: mount namespaces")
	}
	// containerd's mount of a pod's namespace (x), a bed's ip netns add
	// (y), then the kubelet's teardown of x: unmount and remove.
	const script = `set -e
mount -t tmpfs tmpfs /run
mkdir -p /run/netns
if [ -n "$ENSURE" ]; then "$TESTBIN"; fi
touch /run/netns/x
mount --bind /proc/$$/ns/net /run/netns/x
ip netns add y
umount /run/netns/x 2>/dev/null || true
rm /run/netns/x`
	run := func(ensure string) ([]byte, error) {
		cmd := exec.Command("unshare", "--mount", "--propagation", "private", "sh", "-c", script)
		cmd.Env = append(os.Environ(), "ENSURE="+ensure, "TESTBIN="+os.Args[0], ensureNetnsEnv+"=1")
		return cmd.CombinedOutput()
	}
	if out, err := run(""); err == nil {
		t.Logf("without EnsureNetnsMount the namespace was removed all the same on this kernel: the hazard is not shown here")
	} else {
		t.Logf("without EnsureNetnsMount, as expected: %v: %s", err, out)
	}
	if out, err := run("1"); err != nil {
		t.Fatalf("with /run/netns made a mount point first, containerd's namespace could not be removed: %v: %s", err, out)
	}
}
