package nodebed

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"time"
)

// ContainerdSocket is the bed's containerd: its own socket, root and state,
// so it cannot meet another containerd on the machine.
const ContainerdSocket = State + "/containerd/containerd.sock"

// PauseImage is the sandbox image containerd's CRI uses (built at test time).
const PauseImage = "capo.test/pause:1"

// containerdConfig is a CRI containerd as REALNODE.md found it working on
// these machines: cgroupfs (no systemd), overlayfs, and
// restrict_oom_score_adj because the VM denies raising oom_score_adj.
// Calico's CNI is in the chart's host paths, one conflist.
const containerdConfig = `version = 2
root = "%[1]s/containerd"
state = "%[2]s/containerd"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs", "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]

[grpc]
  address = "%[3]s"

[ttrpc]
  address = "%[3]s.ttrpc"

[plugins."io.containerd.internal.v1.opt"]
  path = "%[1]s/containerd-opt"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "%[4]s"
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "%[5]s"
    conf_dir = "%[6]s"
    max_conf_num = 1
`

// startContainerd writes the config and runs containerd until its socket
// answers. The CNI plugins it runs inherit its environment: Calico's names
// the pods' veths with felix's InterfacePrefix.
func (b *Bed) startContainerd() error {
	cfg := filepath.Join(Root, "containerd.toml")
	body := fmt.Sprintf(containerdConfig, Root, State, ContainerdSocket, PauseImage, CNIBinDir, CNIConfDir)
	if err := os.WriteFile(cfg, []byte(body), 0o644); err != nil {
		return err
	}
	p, err := b.Spawn("containerd", b.logPath("containerd"),
		"env", "FELIX_INTERFACEPREFIX="+InterfacePrefix, "containerd", "--config", cfg)
	if err != nil {
		return err
	}
	b.containerd = p
	deadline := time.Now().Add(30 * time.Second)
	for {
		if c, err := net.Dial("unix", ContainerdSocket); err == nil {
			c.Close()
			return nil
		}
		if p.Exited() || time.Now().After(deadline) {
			return fmt.Errorf("containerd did not come up (log: %s)", b.logPath("containerd"))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// ImportImage imports an image archive the way `kind load image-archive`
// does: ctr in the k8s.io namespace, every platform, from stdin.
func (b *Bed) ImportImage(archive string) error {
	f, err := os.Open(archive)
	if err != nil {
		return err
	}
	defer f.Close()
	cmd := exec.Command("ctr", "--address", ContainerdSocket, "--namespace=k8s.io",
		"images", "import", "--all-platforms", "--digests", "-")
	cmd.Stdin = f
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("ctr images import %s: %w\n%s", archive, err, out)
	}
	return nil
}

// Ctr runs ctr against the bed's containerd in the k8s.io namespace.
func Ctr(args ...string) (string, error) {
	out, err := exec.Command("ctr", append([]string{"--address", ContainerdSocket, "--namespace=k8s.io"}, args...)...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("ctr %v: %w\n%s", args, err, out)
	}
	return string(out), nil
}
