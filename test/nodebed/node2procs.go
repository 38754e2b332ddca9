package nodebed

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/capo-net/capo/build/image"
	"github.com/capo-net/capo/test/testbed"
)

func (n *Node2) startContainerd(ctx context.Context) error {
	if err := n.runContainerd(); err != nil {
		return err
	}
	im := n.b.images
	for ref, idx := range map[string]v1.ImageIndex{PauseImage: im.sleeper, SleeperImage: im.sleeper, EchoImage: im.echo, CapoRepository + ":" + CapoTags[0]: im.capo} {
		archive := filepath.Join(n.b.ImagesDir, "node2-"+strings.NewReplacer("/", "-", ":", "-").Replace(ref)+".tar")
		if err := image.WriteArchive(archive, ref, idx, runtime.GOARCH); err != nil {
			return fmt.Errorf("image %s: %w", ref, err)
		}
		if err := importImage(node2Socket, archive); err != nil {
			return err
		}
	}
	return nil
}

// runContainerd writes the node's containerd config and runs it until its
// socket answers; its images stay in its root across restarts.
func (n *Node2) runContainerd() error {
	cfg := filepath.Join(node2Dir, "containerd.toml")
	body := fmt.Sprintf(containerdConfig, node2Dir, node2State, node2Socket, PauseImage, CNIBinDir, CNIConfDir)
	if err := os.WriteFile(cfg, []byte(body), 0o644); err != nil {
		return err
	}
	p, err := n.spawn("node2-containerd", "env", "FELIX_INTERFACEPREFIX="+InterfacePrefix, "containerd", "--config", cfg)
	if err != nil {
		return err
	}
	n.containerd = p
	return waitSocket(p, node2Socket, n.b.logPath("node2-containerd"))
}

func (n *Node2) startKubelet(ctx context.Context) error {
	if err := makeCgroupRootAt(node2CgroupRoot); err != nil {
		return err
	}
	cfg := filepath.Join(node2Dir, "kubelet.yaml")
	body := fmt.Sprintf(kubeletConfig, node2CgroupRoot, node2Socket, 10250, 10248, NoPressure)
	if err := os.WriteFile(cfg, []byte(body), 0o644); err != nil {
		return err
	}
	p, err := n.spawn("node2-kubelet", n.b.Node.Kubelet,
		"--config="+cfg, "--kubeconfig="+n.b.kubeconfig, "--root-dir="+filepath.Join(node2Dir, "kubelet"),
		"--hostname-override="+n.Name, "--node-ip="+n.IP.String(), "--v=2")
	if err != nil {
		return err
	}
	n.kubelet = p
	return nil
}

func (n *Node2) startProxy(ctx context.Context) error {
	p, err := n.spawn("node2-kube-proxy", n.b.Node.Proxy,
		"--kubeconfig="+n.b.kubeconfig, "--hostname-override="+n.Name, "--proxy-mode=iptables",
		"--cluster-cidr="+PodCIDR, "--conntrack-max-per-core=0",
		"--conntrack-tcp-timeout-established=0", "--conntrack-tcp-timeout-close-wait=0",
		"--iptables-localhost-nodeports=false", "--metrics-bind-address=127.0.0.1:10249",
		"--healthz-bind-address=127.0.0.1:10256", "--v=1")
	if err != nil {
		return err
	}
	n.proxy = p
	return nil
}

// startFelix runs the node's felix once its Node exists: its address and
// tunnel address as the first node's, from the same pools.
func (n *Node2) startFelix(ctx context.Context) error {
	err := Poll(ctx, 60*time.Second, func() error {
		_, err := n.b.Kube.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("%w (kubelet log: %s)", err, n.b.logPath("node2-kubelet"))
	}
	tunnel, err := n.b.allocateTunnelAddrFor(ctx, n.Name)
	if err != nil {
		return err
	}
	if err := n.b.annotateAddresses(ctx, n.Name, n.IP, 30, tunnel); err != nil {
		return err
	}
	return n.runFelix(ctx)
}

// runFelix runs the node's felix until it has programmed its first routes.
func (n *Node2) runFelix(ctx context.Context) error {
	dir := filepath.Join(node2Dir, "felix")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	env := n.b.felixEnvFor(n.Name, dir, 9099)
	argv := append([]string{"env", "-i"}, env...)
	argv = append(argv, n.b.Felix, "-c", filepath.Join(dir, "felix.cfg"))
	p, err := n.spawn("node2-felix", argv...)
	if err != nil {
		return err
	}
	n.felix = p
	return Poll(ctx, 90*time.Second, func() error {
		if p.Exited() {
			return fmt.Errorf("felix on %s exited (log: %s)", n.Name, n.b.logPath("node2-felix"))
		}
		if Unencapsulated {
			// Felix's route to the first node's default pool block.
			out, err := exec.Command("ip", "-n", node2Netns, "route", "show", "proto", "80").Output()
			if err == nil && !strings.Contains(string(out), "via "+node1LinkIP.String()) {
				err = fmt.Errorf("no route of felix's to the first node yet: %q", out)
			}
			return err
		}
		return run("ip", "-n", node2Netns, "link", "show", "vxlan.calico")
	})
}

func waitSocket(p *testbed.Process, socket, log string) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		if c, err := net.Dial("unix", socket); err == nil {
			c.Close()
			return nil
		}
		if p.Exited() || time.Now().After(deadline) {
			return fmt.Errorf("containerd did not come up (log: %s)", log)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func importImage(socket, archive string) error {
	f, err := os.Open(archive)
	if err != nil {
		return err
	}
	defer f.Close()
	cmd := exec.Command("ctr", "--address", socket, "--namespace=k8s.io", "images", "import", "--all-platforms", "--digests", "-")
	cmd.Stdin = f
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("ctr images import %s: %w\n%s", archive, err, out)
	}
	return nil
}
