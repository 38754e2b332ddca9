package nodebed

import (
	"encoding/base64"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"sigs.k8s.io/yaml"
)

// The chart's host paths for the node's CNI.
const (
	CNIBinDir  = "/opt/cni/bin"
	CNIConfDir = "/etc/cni/net.d"
	// Conflist is where calico-node's install-cni writes Calico's chain.
	Conflist = CNIConfDir + "/10-calico.conflist"
	// CalicoKubeconfig is the kubeconfig install-cni writes for the plugin.
	CalicoKubeconfig = CNIConfDir + "/calico-kubeconfig"
	// debianCNI is where Debian's containernetworking-plugins puts the
	// reference plugins Calico's image would otherwise bring.
	debianCNI = "/usr/lib/cni"
)

// installCNI does what calico-node's install-cni does on a node: the calico
// binary as calico and calico-ipam, the reference plugins, Calico's own
// conflist rendered from the manifest of the pinned Calico release, and
// the plugin's kubeconfig.
func (b *Bed) installCNI() error {
	for _, n := range []string{"calico", "calico-ipam"} {
		if err := copyFile(b.Bin.Calico, filepath.Join(CNIBinDir, n), 0o755); err != nil {
			return err
		}
	}
	for _, n := range []string{"portmap", "bandwidth", "loopback"} {
		if err := copyFile(filepath.Join(debianCNI, n), filepath.Join(CNIBinDir, n), 0o755); err != nil {
			return fmt.Errorf("%w (apt-get install containernetworking-plugins)", err)
		}
	}
	list, err := CalicoConflist(b.root, b.NodeName)
	if err != nil {
		return err
	}
	b.CalicoConflist = list
	if err := os.WriteFile(Conflist, list, 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(CalicoKubeconfig, b.calicoKubeconfig(), 0o600); err != nil {
		return err
	}
	// calico-node writes the node's name here; the plugin insists on it
	// even with the name in the netconf.
	if err := os.MkdirAll("/var/lib/calico", 0o755); err != nil {
		return err
	}
	return os.WriteFile("/var/lib/calico/nodename", []byte(b.NodeName), 0o644)
}

// CalicoConflist renders the cni_network_config of the pinned Calico
// release's calico.yaml for node, with the substitutions install-cni makes
// under that manifest's settings (veth_mtu "0", the kubeconfig it writes).
func CalicoConflist(root, node string) ([]byte, error) {
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/projectcalico/calico")
	cmd.Dir = root
	dir, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("locating the calico module: %w", err)
	}
	raw, err := os.ReadFile(filepath.Join(strings.TrimSpace(string(dir)), "manifests", "calico.yaml"))
	if err != nil {
		return nil, err
	}
	for _, doc := range strings.Split(string(raw), "\n---\n") {
		var cm struct {
			Kind     string
			Metadata struct{ Name string }
			Data     map[string]string
		}
		if yaml.Unmarshal([]byte(doc), &cm) != nil || cm.Kind != "ConfigMap" || cm.Metadata.Name != "calico-config" {
			continue
		}
		r := strings.NewReplacer("__KUBERNETES_NODE_NAME__", node, "__CNI_MTU__", cm.Data["veth_mtu"],
			"__KUBECONFIG_FILEPATH__", CalicoKubeconfig)
		return []byte(r.Replace(cm.Data["cni_network_config"])), nil
	}
	return nil, fmt.Errorf("no calico-config ConfigMap in the calico module's manifests/calico.yaml")
}

// calicoKubeconfig is install-cni's kubeconfig for the plugin: the API
// server, its CA inline, a token (here the bed's admin).
func (b *Bed) calicoKubeconfig() []byte {
	ca, _ := os.ReadFile(b.CAFile())
	return fmt.Appendf(nil, `apiVersion: v1
kind: Config
clusters:
- name: local
  cluster:
    server: %s
    certificate-authority-data: %s
users:
- name: calico
  user:
    token: %s
contexts:
- name: calico-context
  context:
    cluster: local
    user: calico
current-context: calico-context
`, b.APIServerURL, base64.StdEncoding.EncodeToString(ca), b.AdminToken())
}

func copyFile(src, dst string, mode os.FileMode) error {
	data, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	tmp := dst + ".tmp"
	if err := os.WriteFile(tmp, data, mode); err != nil {
		return err
	}
	return os.Rename(tmp, dst)
}
