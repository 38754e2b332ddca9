package testbed

import (
	"path/filepath"
	"strings"
)

// KubernetesVersion is the release test/tools pins; the node components are
// stamped with it, as a release build is, so the Node reports it.
const KubernetesVersion = "v1.33.5"

// NodeBinaries are the rest of a Kubernetes node and cluster, built from
// the same pins as the bed's kube-apiserver and cached beside it, and
// Calico's felix.
type NodeBinaries struct {
	Kubelet, ControllerManager, Scheduler, Proxy, Kubectl string
	Felix                                                 string
}

// felixPkg is Calico's dataplane agent, built without cgo.
const felixPkg = "github.com/projectcalico/calico/felix/cmd/calico-felix"

// BuildNodeBinaries builds whatever the cache lacks, in one go build
// (minutes the first time, on top of the servers; nothing after).
func BuildNodeBinaries(root string, logf func(string, ...any)) (*NodeBinaries, error) {
	dir, err := toolsDir(root, "")
	if err != nil {
		return nil, err
	}
	nb := &NodeBinaries{
		Kubelet:           filepath.Join(dir, "kubelet"),
		ControllerManager: filepath.Join(dir, "kube-controller-manager"),
		Scheduler:         filepath.Join(dir, "kube-scheduler"),
		Proxy:             filepath.Join(dir, "kube-proxy"),
		Kubectl:           filepath.Join(dir, "kubectl"),
		Felix:             filepath.Join(dir, "calico-felix"),
	}
	outs := map[string]string{felixPkg: nb.Felix}
	for _, out := range []string{nb.Kubelet, nb.ControllerManager, nb.Scheduler, nb.Proxy, nb.Kubectl} {
		outs["k8s.io/kubernetes/cmd/"+filepath.Base(out)] = out
	}
	// The version stamp reaches the Kubernetes components; felix carries
	// its own and ignores it.
	set := buildSet{dir: filepath.Join(root, "test", "tools"), ldflags: versionLDFlags(), outs: outs}
	return nb, set.build(logf)
}

// BuildControllerManager builds kube-controller-manager alone, for a bed
// that runs no node (the same cached file BuildNodeBinaries makes).
func BuildControllerManager(root string, logf func(string, ...any)) (string, error) {
	dir, err := toolsDir(root, "")
	if err != nil {
		return "", err
	}
	out := filepath.Join(dir, "kube-controller-manager")
	set := buildSet{dir: filepath.Join(root, "test", "tools"), ldflags: versionLDFlags(), outs: map[string]string{"k8s.io/kubernetes/cmd/kube-controller-manager": out}}
	return out, set.build(logf)
}

// versionLDFlags stamp KubernetesVersion where component-base reads it;
// unstamped, a kubelet reports v0.0.0-master.
func versionLDFlags() string {
	major, rest, _ := strings.Cut(strings.TrimPrefix(KubernetesVersion, "v"), ".")
	minor, _, _ := strings.Cut(rest, ".")
	v := "k8s.io/component-base/version"
	return "-X " + v + ".gitVersion=" + KubernetesVersion + " -X " + v + ".gitMajor=" + major + " -X " + v + ".gitMinor=" + minor +
		" -X " + v + ".gitTreeState=clean"
}
