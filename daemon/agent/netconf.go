package agent

import (
	"log/slog"
	"os"

	"github.com/capo-net/capo/install"
)

// CalicoNetconfGroup is the calico plugin's calico_api_group in the node's
// CNI config, which Calico's CNI plugins obey: the agent must speak the
// group calico-ipam does on its node. "" without --cni-conf-dir or when
// the config does not set it. Called once at start; it logs why not.
func (o Options) CalicoNetconfGroup() string {
	g, err := netconfGroup(o.CNIConfDir)
	if err != nil {
		slog.Warn("no calico_api_group read from the CNI config; deciding Calico's API group without it", "err", err)
	}
	return g
}

// quietNetconfGroup is the same for the prober's every check.
func (o Options) quietNetconfGroup() string {
	g, _ := netconfGroup(o.CNIConfDir)
	return g
}

func netconfGroup(dir string) (string, error) {
	if dir == "" {
		return "", nil
	}
	path, err := install.RuntimeConfig(dir)
	if err != nil {
		return "", err
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	st, err := install.Inspect(data)
	if err != nil {
		return "", err
	}
	return st.CalicoAPIGroup, nil
}
