package testbed

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/invoke"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/cni/pkg/version"
	corev1 "k8s.io/api/core/v1"
)

// Sandbox is one pod sandbox: a network namespace and a container ID, set
// up and torn down through libcni as containerd does.
type Sandbox struct {
	Env         *Env
	Pod         *corev1.Pod
	ContainerID string
	NetNS       string // path, like /var/run/netns/<name>
	IfName      string // eth0 unless a test changes it
	IPs         []net.IP
	conflist    *libcni.NetworkConfigList
	cni         *libcni.CNIConfig
	nsName      string
	removeOnce  sync.Once
}

// NewSandbox creates a netns for pod and prepares the chain in conflist.
func (e *Env) NewSandbox(pod *corev1.Pod, conflist []byte) *Sandbox {
	e.T.Helper()
	var list *libcni.NetworkConfigList
	if conflist != nil { // nil: the caller execs plugins itself
		var err error
		if list, err = libcni.ConfListFromBytes(conflist); err != nil {
			e.T.Fatalf("conflist: %v", err)
		}
	}
	s := &Sandbox{
		Env: e, Pod: pod, conflist: list,
		ContainerID: NewContainerID(),
		nsName:      fmt.Sprintf("%s%d-%d", netnsPrefix, os.Getpid(), e.Bed.seq.Add(1)),
		cni:         libcni.NewCNIConfigWithCacheDir([]string{e.BinDir}, filepath.Join(e.Dir, "cni-cache"), &invoke.DefaultExec{RawExec: &invoke.RawExec{Stderr: e.pluginLog()}, PluginDecoder: version.PluginDecoder{}}),
	}
	s.NetNS = filepath.Join(netnsDir, s.nsName)
	s.IfName = "eth0"
	if out, err := exec.Command("ip", "netns", "add", s.nsName).CombinedOutput(); err != nil {
		e.T.Fatalf("ip netns add %s: %v: %s", s.nsName, err, out)
	}
	e.Bed.onStop(s.RemoveNetNS)
	e.T.Cleanup(s.RemoveNetNS)
	return s
}

// runtimeConf is what containerd's CRI plugin passes for a pod sandbox.
func (s *Sandbox) runtimeConf() *libcni.RuntimeConf {
	return &libcni.RuntimeConf{
		ContainerID: s.ContainerID,
		NetNS:       s.NetNS,
		IfName:      s.IfName,
		Args: [][2]string{
			{"IgnoreUnknown", "1"},
			{"K8S_POD_NAMESPACE", s.Pod.Namespace},
			{"K8S_POD_NAME", s.Pod.Name},
			{"K8S_POD_INFRA_CONTAINER_ID", s.ContainerID},
			{"K8S_POD_UID", string(s.Pod.UID)},
		},
	}
}

// Add runs CNI ADD for the whole chain and records the pod's addresses.
func (s *Sandbox) Add(ctx context.Context) error {
	res, err := s.cni.AddNetworkList(ctx, s.conflist, s.runtimeConf())
	if err != nil {
		return err
	}
	r, err := current.NewResultFromResult(res)
	if err != nil {
		return fmt.Errorf("converting result: %w", err)
	}
	s.IPs = nil
	for _, ip := range r.IPs {
		s.IPs = append(s.IPs, ip.Address.IP)
	}
	return nil
}

// Del runs CNI DEL for the whole chain, as the runtime does on teardown.
func (s *Sandbox) Del(ctx context.Context) error {
	return s.cni.DelNetworkList(ctx, s.conflist, s.runtimeConf())
}

// DelWith runs CNI DEL through another conflist, as a runtime does that read
// the config dir again in between (say, just after calico-node rewrote it).
func (s *Sandbox) DelWith(ctx context.Context, conflist []byte) error {
	list, err := libcni.ConfListFromBytes(conflist)
	if err != nil {
		return fmt.Errorf("conflist: %w", err)
	}
	return s.cni.DelNetworkList(ctx, list, s.runtimeConf())
}

// Check runs CNI CHECK.
func (s *Sandbox) Check(ctx context.Context) error {
	return s.cni.CheckNetworkList(ctx, s.conflist, s.runtimeConf())
}

// RemoveNetNS deletes the sandbox's namespace (its veth goes with it), as
// happens when a node reboots before the runtime's DEL.
func (s *Sandbox) RemoveNetNS() {
	s.removeOnce.Do(func() { deleteNetNS(s.nsName) })
}

// IP is the pod's first address as a string.
func (s *Sandbox) IP() string {
	if len(s.IPs) == 0 {
		return ""
	}
	return s.IPs[0].String()
}

// NewContainerID is a container ID in the form containerd uses: 64 hex digits.
func NewContainerID() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func deleteNetNS(name string) {
	out, err := exec.Command("ip", "netns", "del", name).CombinedOutput()
	if err != nil && !strings.Contains(string(out), "No such file") {
		fmt.Fprintf(os.Stderr, "testbed: ip netns del %s: %v: %s\n", name, err, out)
	}
}
