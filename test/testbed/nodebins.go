package testbed

import (
	"path/filepath"
	"strings"
)

// KubernetesVersion is the release test/tools pins; the node components are
// stamped with it, as a release build is, so the Node reports it.
const KubernetesVersion = "v1.33.4"

// NodeBinaries are the rest of a Kubernetes node and cluster, built from
// the same pins as the bed's kube-apiserver and cached beside it.
type NodeBinaries struct {
	Kubelet, ControllerManager, Scheduler, Proxy, Kubectl string
}

// BuildNodeBinaries builds whatever the cache lacks (minutes the first
// time, on top of the servers; nothing after).
func BuildNodeBinaries(root string, logf func(string, ...any)) (*NodeBinaries, error) {
	dir, err := serversDir(root)
	if err != nil {
		return nil, err
	}
	nb := &NodeBinaries{
		Kubelet:           filepath.Join(dir, "kubelet"),
		ControllerManager: filepath.Join(dir, "kube-controller-manager"),
		Scheduler:         filepath.Join(dir, "kube-scheduler"),
		Proxy:             filepath.Join(dir, "kube-proxy"),
		Kubectl:           filepath.Join(dir, "kubectl"),
	}
	for _, out := range []string{nb.Kubelet, nb.ControllerManager, nb.Scheduler, nb.Proxy, nb.Kubectl} {
		if err := buildNodeBinary(root, out, logf); err != nil {
			return nil, err
		}
	}
	return nb, nil
}

// BuildControllerManager builds kube-controller-manager alone, for a bed
// that runs no node (the same cached file BuildNodeBinaries makes).
func BuildControllerManager(root string, logf func(string, ...any)) (string, error) {
	dir, err := serversDir(root)
	if err != nil {
		return "", err
	}
	out := filepath.Join(dir, "kube-controller-manager")
	return out, buildNodeBinary(root, out, logf)
}

// serversDir is where the servers pinned in test/tools are cached.
func serversDir(root string) (string, error) {
	cache, err := CacheDir()
	if err != nil {
		return "", err
	}
	tools := filepath.Join(root, "test", "tools")
	key, err := hashFiles(filepath.Join(tools, "go.mod"), filepath.Join(tools, "go.sum"))
	if err != nil {
		return "", err
	}
	return filepath.Join(cache, "servers-"+key), nil
}

func buildNodeBinary(root, out string, logf func(string, ...any)) error {
	pkg := "k8s.io/kubernetes/cmd/" + filepath.Base(out)
	return buildCachedFlags(filepath.Join(root, "test", "tools"), pkg, out, versionLDFlags(), logf)
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
