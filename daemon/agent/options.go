package agent

import (
	"log/slog"
	"os"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/dynamic"

	"github.com/capo-net/capo/daemon/agent/cnichain"
	"github.com/capo-net/capo/install"
	"github.com/capo-net/capo/pkg/journal"
	"github.com/capo-net/capo/pkg/wire"
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

// Options are the agent's settings, from flags and the environment.
type Options struct {
	NodeName        string
	Socket          string
	StateDir        string
	MetricsAddr     string
	HealthAddr      string // /healthz, /readyz, /livez; the metrics address serves them too when equal
	ConfigNamespace string
	ConfigMap       string
	DrainInterval   time.Duration
	SweepInterval   time.Duration // ADD records of gone pods: see sweepAddrs
	CNIBinDir       string        // where the delegate lives as the agent sees it; "" = as recorded

	// ManageCNI makes the agent install capo-ipam while the node is opted
	// in and remove it otherwise.
	ManageCNI      bool
	CNIConfDir     string
	CapoIPAMSource string        // the capo-ipam binary to install
	CNIResync      time.Duration // periodic check of the CNI chain
	UninstallGrace time.Duration // at exit, for a DaemonSet replaced under the same name; 0 = replaceGrace

	// Dynamic watches Calico's ClusterInformation for its datastore lock;
	// nil reads it at each readiness probe instead.
	Dynamic dynamic.Interface

	// CalicoNodeSelector picks calico-node's pods: while one on this node
	// is replaced, with ManageCNI, the selected pods' addresses are held
	// (rewritewindow.go); nil or empty: never.
	CalicoNodeSelector labels.Selector
}

// ipamExtra is what capo-ipam must be told beside its delegate: where this
// agent listens and keeps state, when not the defaults.
// installOptions are how --manage-cni installs capo-ipam.
func installOptions(o Options) install.Options {
	return install.Options{CNIBinDir: o.CNIBinDir, CNIConfDir: o.CNIConfDir, Source: o.CapoIPAMSource, IPAMExtra: ipamExtra(o)}
}

// RestoreChain, with --manage-cni, puts capo-ipam back into the node's
// CNI chain before anything reads the API server, if the node was opted
// in when the agent last kept the chain (cnichain.Restore). It logs what
// it did; a failure leaves the chain to the CNI manager once the agent
// runs.
func RestoreChain(o Options) {
	if !o.ManageCNI {
		return
	}
	changed, err := cnichain.Restore(installOptions(o), journal.Dir{Root: o.StateDir})
	switch {
	case err != nil:
		slog.Error("cannot put capo-ipam back into the CNI chain at start; the CNI manager retries once the agent runs", "err", err)
	case changed:
		slog.Warn("put capo-ipam back into the CNI chain at start, before reading the API server: the node was opted in when the agent last ran, and the chain had been rewritten (calico-node restarted while the agent was away)")
	}
}

func ipamExtra(o Options) map[string]any {
	extra := map[string]any{}
	if o.Socket != wire.DefaultSocket {
		extra["agent_socket"] = o.Socket
	}
	if o.StateDir != journal.DefaultStateDir {
		extra["state_dir"] = o.StateDir
	}
	return extra
}
