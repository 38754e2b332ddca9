package nodebed

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// kubeletConfig is a KubeletConfiguration for a test node on these
// machines (REALNODE.md): cgroupfs under the bed's own cgroup root, cgroup
// v1 allowed, swap tolerated, no iptables chains of its own (kube-proxy
// makes its own), oomScoreAdj 0 (the VM denies raising it), anonymous
// AlwaysAllow for kubectl logs/exec. Image GC is off (the test images
// cannot be pulled back), and the disk signals are near zero so a busy
// shared disk never evicts: only the memory threshold a test sets does.
// The node's lease is renewed every 5 s (a quarter of its 20 s), and the
// controller-manager's grace is 20 s (kube.go): a node that dies goes
// NotReady in about 20 s, not Kubernetes' default 40 to 50.
const kubeletConfig = `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cgroupDriver: cgroupfs
cgroupRoot: %[1]s
failCgroupV1: false
failSwapOn: false
makeIPTablesUtilChains: false
oomScoreAdj: 0
containerRuntimeEndpoint: unix://%[2]s
authentication:
  anonymous: {enabled: true}
  webhook: {enabled: false}
authorization: {mode: AlwaysAllow}
port: %[3]d
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: %[4]d
resolvConf: /etc/resolv.conf
serializeImagePulls: false
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionPressureTransitionPeriod: 1s
nodeLeaseDurationSeconds: 20
nodeStatusUpdateFrequency: 5s
evictionHard:
  memory.available: "%[5]s"
  nodefs.available: "1%%"
  nodefs.inodesFree: "1%%"
  imagefs.available: "1%%"
`

// startKubelet runs the kubelet with memory.available below memAvailable
// as its hard eviction threshold ("100Mi": no pressure on this machine).
func (b *Bed) startKubelet(memAvailable string) error {
	if b.kubeletPort == 0 {
		var err error
		if b.kubeletPort, err = freePort(b.NodeIP); err != nil {
			return err
		}
		if b.kubeletHealthz, err = freePort(net.IPv4(127, 0, 0, 1)); err != nil {
			return err
		}
	}
	if err := makeCgroupRoot(); err != nil {
		return err
	}
	cfg := filepath.Join(Root, "kubelet.yaml")
	body := fmt.Sprintf(kubeletConfig, CgroupRoot, ContainerdSocket, b.kubeletPort, b.kubeletHealthz, memAvailable)
	if err := os.WriteFile(cfg, []byte(body), 0o644); err != nil {
		return err
	}
	p, err := b.Spawn("kubelet", b.logPath("kubelet"), b.Node.Kubelet,
		"--config="+cfg, "--kubeconfig="+b.kubeconfig, "--root-dir="+filepath.Join(Root, "kubelet"),
		"--hostname-override="+b.NodeName, "--node-ip="+b.NodeIP.String(), "--v=2")
	if err != nil {
		return err
	}
	b.kubelet = p
	url := "http://127.0.0.1:" + strconv.Itoa(b.kubeletHealthz) + "/healthz"
	return b.WaitHTTP(p, url, false, 60*time.Second)
}

// RestartKubelet stops the kubelet and starts it with a new memory
// eviction threshold, as an operator changing its flags would. Pods keep
// running in containerd meanwhile.
func (b *Bed) RestartKubelet(memAvailable string) error {
	b.kubelet.Stop()
	return b.startKubelet(memAvailable)
}

// freePort asks the kernel for an unused port on ip.
func freePort(ip net.IP) (int, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(ip.String(), "0"))
	if err != nil {
		return 0, err
	}
	defer l.Close()
	a, ok := l.Addr().(*net.TCPAddr)
	if !ok {
		return 0, fmt.Errorf("listener on %s has a %T address", ip, l.Addr())
	}
	return a.Port, nil
}

// makeCgroupRoot creates the kubelet's cgroup root in every hierarchy (the
// kubelet insists it exists); cpuset children start empty, so it gets its
// parent's CPUs and memory nodes.
func makeCgroupRoot() error { return makeCgroupRootAt(CgroupRoot) }

// makeCgroupRootAt creates the cgroup root in every hierarchy.
func makeCgroupRootAt(root string) error {
	hier, err := filepath.Glob("/sys/fs/cgroup/*")
	if err != nil {
		return err
	}
	for _, h := range hier {
		if st, err := os.Stat(h); err != nil || !st.IsDir() {
			continue
		}
		d := filepath.Join(h, root)
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("cgroup %s: %w", d, err)
		}
		if filepath.Base(h) != "cpuset" {
			continue
		}
		for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
			v, err := os.ReadFile(filepath.Join(h, f))
			if err != nil {
				return err
			}
			if err := os.WriteFile(filepath.Join(d, f), v, 0o644); err != nil {
				return fmt.Errorf("cgroup %s/%s: %w", d, f, err)
			}
		}
	}
	return nil
}
