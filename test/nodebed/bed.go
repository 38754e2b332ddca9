// Package nodebed runs a real Kubernetes node on this machine for capo's
// real-node tests: the test bed's etcd and kube-apiserver, plus
// kube-controller-manager, kube-scheduler, a kubelet, kube-proxy and kubectl
// built from the same pins, Debian's containerd and runc, Calico's CNI as
// calico-node would install it, and capo's image, built from this checkout
// and run by the chart's DaemonSet and Deployment.
//
// The bed owns the node's paths (the CNI dirs, capo's and Calico's host
// dirs) for its run: it moves what was there aside and puts it back when
// it stops, is interrupted, or, if it was killed, when the next run starts.
// Only one runs at a time on a machine.
package nodebed

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"syscall"

	"github.com/projectcalico/calico/libcalico-go/lib/clientv3"

	"github.com/capo-net/capo/test/testbed"
)

// NodeName is the node the kubelet registers.
const NodeName = "capo-realnode"

// Bed is the running node and its cluster.
type Bed struct {
	*testbed.Bed
	Node           *testbed.NodeBinaries
	NodeName       string
	NodeIP         net.IP
	Calico         clientv3.Interface // the Kubernetes datastore
	CalicoConflist []byte             // the conflist as Calico wrote it, before capo
	ImagesDir      string             // the images' binaries (capo/<arch>/capo-ipam, ...)
	Felix          string             // the felix binary
	TunnelAddr     net.IP             // the node's VXLAN tunnel address, from TunnelPool

	root, kubeconfig                                  string
	containerd, controllerManager, scheduler, kubelet *testbed.Process
	proxy, felix                                      *testbed.Process
	kubeletPort, kubeletHealthz                       int
	lock                                              *os.File
	pools                                             int
	images                                            *images
}

// Start brings the node up, ready for pods; the chart is not installed.
func Start(ctx context.Context, logf func(string, ...any)) (*Bed, error) {
	if os.Geteuid() != 0 {
		return nil, errors.New("the real-node bed runs containerd and a kubelet and must run as root")
	}
	// The bed reads and cleans the kubelet's cgroups by cgroup v1 paths, as
	// on the machines REALNODE.md describes.
	if !exists("/sys/fs/cgroup/memory/memory.usage_in_bytes") {
		return nil, errors.New("the real-node bed needs cgroup v1 (/sys/fs/cgroup/memory); this machine has another layout")
	}
	// Before containerd mounts a pod's network namespace: see
	// EnsureNetnsMount for what the test beds beside it would do otherwise.
	if err := testbed.EnsureNetnsMount(); err != nil {
		return nil, err
	}
	lock, err := lockHost()
	if err != nil {
		return nil, err
	}
	root, err := testbed.RepoRoot()
	if err != nil {
		lock.Close()
		return nil, err
	}
	nb, err := testbed.BuildNodeBinaries(root, logf)
	if err != nil {
		lock.Close()
		return nil, err
	}
	if err := sweepEarlierRun(nb, logf); err != nil {
		lock.Close()
		return nil, fmt.Errorf("cleaning up after an earlier run: %w", err)
	}
	ip, err := hostIP()
	if err != nil {
		lock.Close()
		return nil, err
	}
	imagesDir, err := os.MkdirTemp("", "capo-realnode-images-")
	if err != nil {
		lock.Close()
		return nil, err
	}
	im := buildImages(ctx, root, imagesDir) // meanwhile the servers start
	tb, err := testbed.StartWith(ctx, logf, testbed.Options{Address: ip, ServiceAccounts: true, NoCapoBinaries: true})
	if err != nil {
		<-im.done
		os.RemoveAll(imagesDir)
		lock.Close()
		return nil, err
	}
	b := &Bed{Bed: tb, Node: nb, NodeName: NodeName, NodeIP: ip, Calico: tb.Calico(testbed.Kubernetes), root: root, lock: lock, ImagesDir: imagesDir, images: im, Felix: nb.Felix}
	if err := b.start(ctx, im, logf); err != nil {
		b.Stop(logf)
		return nil, err
	}
	return b, nil
}

func (b *Bed) start(ctx context.Context, im *images, logf func(string, ...any)) error {
	if err := takeOver(); err != nil {
		return err
	}
	if err := os.MkdirAll(State, 0o755); err != nil {
		return err
	}
	b.kubeconfig = filepath.Join(Root, "admin.kubeconfig")
	if err := b.WriteKubeconfig(b.kubeconfig); err != nil {
		return err
	}
	if err := b.startContainerd(); err != nil {
		return err
	}
	if err := b.importImages(im); err != nil {
		return err
	}
	if err := b.installCNI(); err != nil {
		return err
	}
	if err := b.createDefaultPool(ctx); err != nil {
		return err
	}
	for _, start := range []func() error{b.startControllerManager, b.startScheduler, b.startProxy} {
		if err := start(); err != nil {
			return err
		}
	}
	if err := b.startKubelet(NoPressure); err != nil {
		return err
	}
	if err := b.prepareFelix(ctx); err != nil {
		return err
	}
	if err := b.startFelix(); err != nil {
		return err
	}
	if err := b.waitServiceRouted(ctx); err != nil {
		return err
	}
	return b.waitNodeSchedulable(ctx)
}

// Stop ends every process, removes what the node made, and gives the host
// paths back. Safe to call more than once.
func (b *Bed) Stop(logf func(string, ...any)) {
	for _, p := range []*testbed.Process{b.kubelet, b.felix, b.proxy, b.scheduler, b.controllerManager, b.containerd} {
		if p != nil {
			p.Stop()
		}
	}
	b.kubelet, b.felix, b.proxy, b.scheduler, b.controllerManager, b.containerd = nil, nil, nil, nil, nil, nil
	if err := sweepEarlierRun(b.Node, logf); err != nil {
		logf("nodebed: cleaning up: %v", err)
	}
	b.Bed.Stop()
	if b.images != nil {
		<-b.images.done // its binaries are in ImagesDir
	}
	os.RemoveAll(b.ImagesDir)
	if b.lock != nil {
		b.lock.Close()
		b.lock = nil
	}
}

// sweepEarlierRun undoes a run's host state: processes, mounts, iptables,
// the host paths. A no-op when nothing is left.
func sweepEarlierRun(nb *testbed.NodeBinaries, logf func(string, ...any)) error {
	if !exists(Root) && !exists(State) {
		return nil
	}
	var errs []error
	if err := sweepRuntime(logf); err != nil {
		errs = append(errs, err)
	}
	if err := cleanupProxy(nb.Proxy); err != nil {
		errs = append(errs, err)
	}
	if err := sweepNode2(); err != nil {
		errs = append(errs, err)
	}
	if err := sweepFelix(logf); err != nil {
		errs = append(errs, err)
	}
	if tookOver() {
		if err := restoreHost(); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if err := os.RemoveAll(State); err != nil {
		return err
	}
	return os.RemoveAll(Root)
}

// lockHost makes this the machine's only real-node bed until it exits.
func lockHost() (*os.File, error) {
	f, err := os.OpenFile("/run/capo-realnode.lock", os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, errors.New("another real-node bed is running on this machine (it holds /run/capo-realnode.lock); wait for it")
	}
	return f, nil
}

// RepoRoot is the repository the bed was built from.
func (b *Bed) RepoRoot() string { return b.root }

func exists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

func (b *Bed) logPath(name string) string { return filepath.Join(b.Dir, name+".log") }
