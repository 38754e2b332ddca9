// Command capo-agent runs on every node (DaemonSet): it reserves a selected
// pod's addresses before capo-ipam lets calico-ipam release them.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/projectcalico/calico/libcalico-go/lib/clientv3"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"

	"github.com/capo-net/capo/daemon"
	"github.com/capo-net/capo/daemon/agent"
	"github.com/capo-net/capo/pkg/journal"
	"github.com/capo-net/capo/pkg/kubeclient"
	"github.com/capo-net/capo/pkg/version"
	"github.com/capo-net/capo/pkg/wire"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == agent.NodeInfoCommand {
		os.Exit(nodeInfo(os.Args[2:], os.Stdout, os.Stderr))
	}
	os.Exit(daemon.Main("capo-agent", parseAndRestore, func(ctx context.Context, opts agent.Options, kube kubernetes.Interface, calico clientv3.Interface) error {
		meta, err := kubeclient.Metadata("capo-agent", 50)
		if err != nil {
			return err
		}
		if opts.Dynamic, err = kubeclient.Dynamic("capo-agent", 5); err != nil {
			return err
		}
		return agent.New(opts, kube, meta, calico).Run(ctx)
	}))
}

// parseAndRestore parses the flags and, with --manage-cni, puts capo-ipam
// back into the node's CNI chain first thing (agent.RestoreChain): before
// the API server is read, which may fail for as long as an outage lasts
// while calico-node's install-cni has rewritten the chain.
func parseAndRestore(args []string) (agent.Options, slog.Level, float32, error) {
	o, level, qps, err := parseFlags(args)
	if err == nil {
		daemon.SetupLogs(os.Stderr, "capo-agent", level)
		agent.RestoreChain(o)
	}
	return o, level, qps, err
}

// nodeInfo prints the node's CNI configs and journal, redacted, and exits:
// `capo-agent node-info <the agent's own flags>`, which capoctl bundle runs
// in the agent's container through pods/exec. It reads the files itself,
// so it answers while the agent is stuck too.
func nodeInfo(args []string, out, errw io.Writer) int {
	opts, _, _, err := parseFlags(args)
	if err != nil {
		fmt.Fprintln(errw, err)
		return 2
	}
	if err := agent.WriteNodeInfo(out, opts); err != nil {
		fmt.Fprintln(errw, "capo-agent node-info:", err)
		return 1
	}
	return 0
}

func parseFlags(args []string) (agent.Options, slog.Level, float32, error) {
	fs := flag.NewFlagSet("capo-agent", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), `capo-agent %s: reserves a selected pod's Calico addresses before they are released.

The Calico datastore is configured the way calico-node's is, from the
environment: DATASTORE_TYPE (kubernetes or etcdv3), KUBECONFIG,
ETCD_ENDPOINTS, ETCD_KEY_FILE, ETCD_CERT_FILE, ETCD_CA_CERT_FILE. The
Kubernetes API is reached through KUBECONFIG, or in-cluster credentials.

Flags:
`, version.Version)
		fs.PrintDefaults()
	}
	var o agent.Options
	var common daemon.Flags
	common.Register(fs, 20, "; each reservation costs about two requests")
	fs.StringVar(&o.NodeName, "node-name", os.Getenv("NODENAME"), "this node's name (env NODENAME)")
	fs.StringVar(&o.Socket, "socket", wire.DefaultSocket, "unix socket capo-ipam calls")
	fs.StringVar(&o.StateDir, "state-dir", journal.DefaultStateDir, "host directory holding capo-ipam's journal and ADD records")
	fs.StringVar(&o.MetricsAddr, "metrics-addr", ":9467", "address serving /metrics")
	fs.StringVar(&o.HealthAddr, "health-addr", "127.0.0.1:9469", "address serving /healthz, /readyz and /livez (loopback: the agent runs on the host's network); the same as --metrics-addr serves them there")
	fs.StringVar(&o.ConfigNamespace, "config-namespace", kubeclient.Env("POD_NAMESPACE", "kube-system"), "namespace of the config ConfigMap (env POD_NAMESPACE)")
	fs.StringVar(&o.ConfigMap, "config-map", "capo-config", "name of the ConfigMap holding config.yaml (a CapoConfig); absent means the defaults")
	fs.DurationVar(&o.DrainInterval, "drain-interval", 10*time.Second, "how often journaled DELs are replayed")
	fs.DurationVar(&o.SweepInterval, "addr-sweep-interval", 5*time.Minute, "how often the ADD records of pods gone from the node are checked for teardowns that went around capo-ipam (all records are also checked at start and after each CNI re-apply)")
	fs.StringVar(&o.CNIBinDir, "cni-bin-dir", "", "the node's CNI bin dir as this process sees it: where capo-ipam is installed and the delegate replayed from; empty means the recorded CNI_PATH (and no --manage-cni)")
	fs.BoolVar(&o.ManageCNI, "manage-cni", false, "install capo-ipam into the node's CNI chain while the node is opted in, remove it otherwise, re-apply when calico-node rewrites it; needs --cni-bin-dir and --cni-conf-dir")
	fs.StringVar(&o.CNIConfDir, "cni-conf-dir", "", "the node's CNI conf dir as this process sees it (with --manage-cni)")
	self, _ := os.Executable()
	fs.StringVar(&o.CapoIPAMSource, "capo-ipam-source", filepath.Join(filepath.Dir(self), "capo-ipam"), "the capo-ipam binary --manage-cni installs (capo-ipam-kube is taken from beside it)")
	fs.DurationVar(&o.CNIResync, "cni-resync", 30*time.Second, "with --manage-cni, how often the CNI chain is checked besides watching it")
	fs.DurationVar(&o.UninstallGrace, "uninstall-grace", 12*time.Second, "with --manage-cni, how long at exit a deleted DaemonSet may take to be re-created under the same name before the chain is restored; keep it well inside the pod's termination grace")
	calicoNode := fs.String("calico-node-selector", agent.DefaultCalicoNodeSelector, "with --manage-cni, the label selector of calico-node's pods: while the one on this node is replaced (its install-cni rewrites the CNI config without capo-ipam), the node's selected pods' addresses are held; empty: never")
	if err := fs.Parse(args); err != nil {
		return o, 0, 0, err
	}
	sel, err := labels.Parse(*calicoNode)
	if err != nil {
		return o, 0, 0, fmt.Errorf("capo-agent: --calico-node-selector %q: %w (a label selector, as kubectl's -l takes)", *calicoNode, err)
	}
	o.CalicoNodeSelector = sel
	if o.NodeName == "" {
		return o, 0, 0, fmt.Errorf("capo-agent: --node-name or NODENAME is required")
	}
	if o.SweepInterval < time.Second {
		return o, 0, 0, fmt.Errorf("capo-agent: --addr-sweep-interval %s is below 1s", o.SweepInterval)
	}
	if o.DrainInterval < time.Second {
		return o, 0, 0, fmt.Errorf("capo-agent: --drain-interval %s is below 1s", o.DrainInterval)
	}
	if o.ManageCNI && (o.CNIBinDir == "" || o.CNIConfDir == "") {
		return o, 0, 0, fmt.Errorf("capo-agent: --manage-cni needs --cni-bin-dir and --cni-conf-dir")
	}
	if o.ManageCNI && o.CNIResync < time.Second {
		return o, 0, 0, fmt.Errorf("capo-agent: --cni-resync %s is below 1s", o.CNIResync)
	}
	l, qps, err := common.Resolve("capo-agent")
	return o, l, qps, err
}
