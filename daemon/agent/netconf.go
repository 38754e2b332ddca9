package agent

import (
	"log/slog"
	"os"

	"github.com/capo-net/capo/install"
)

// CalicoNetconfGroup is the calico plugin's calico_api_group in the node's
// CNI config, which Calico's CNI plugins obey when CALICO_API_GROUP is not
// set: the agent must speak the group calico-ipam does on its node. ""
// without --cni-conf-dir or when the config does not set it.
func (o Options) CalicoNetconfGroup() string {
	if o.CNIConfDir == "" {
		return ""
	}
	path, err := install.RuntimeConfig(o.CNIConfDir)
	if err != nil {
		slog.Warn("no CNI config to read calico_api_group from; deciding Calico's API group without it", "err", err)
		return ""
	}
	data, err := os.ReadFile(path)
	if err != nil {
		slog.Warn("reading calico_api_group", "config", path, "err", err)
		return ""
	}
	st, err := install.Inspect(data)
	if err != nil {
		slog.Warn("reading calico_api_group", "config", path, "err", err)
		return ""
	}
	return st.CalicoAPIGroup
}
