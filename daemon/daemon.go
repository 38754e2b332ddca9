// Package daemon is what capo-agent and capo-controller share around their
// own logic: JSON logs, the clients, signals, and the metrics and health port.
package daemon

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"syscall"
	"time"

	"github.com/projectcalico/calico/libcalico-go/lib/apiconfig"
	"github.com/projectcalico/calico/libcalico-go/lib/clientv3"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/capo-net/capo/pkg/calico/apigroup"
	"github.com/capo-net/capo/pkg/calico/client"
	"github.com/capo-net/capo/pkg/kubeclient"
	"github.com/capo-net/capo/pkg/version"
)

// Run sets up logging and the clients, then runs start until SIGINT or
// SIGTERM. It returns the process exit code.
// netconf, when set, gives the node's calico_api_group (see pkg/calico/apigroup).
func Run(component string, level slog.Level, datastoreQPS float32, netconf func() string, start func(ctx context.Context, kube kubernetes.Interface, calico clientv3.Interface) error) int {
	SetupLogs(os.Stderr, component, level)
	LimitMemory()
	kube, err := kubeclient.Kubernetes(component, 50)
	if err != nil {
		slog.Error("startup", "err", err)
		return 1
	}
	calico, datastore, err := client.FromEnvironment(datastoreQPS)
	if err != nil {
		slog.Error("startup", "err", err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	slog.Info("starting", "version", version.Version, "datastore", datastore)
	m, err := decideCalicoAPI(ctx, kube, datastore, netconf)
	if err != nil {
		slog.Error("startup", "err", err)
		return 1
	}
	if calico, err = client.For(calico, m, func() (*rest.Config, error) { return kubeclient.REST(component, datastoreQPS) }); err != nil {
		slog.Error("startup", "err", err)
		return 1
	}
	if err := start(ctx, kube, calico); err != nil {
		slog.Error(component+" stopped", "err", err)
		return 1
	}
	return 0
}

// Main parses the command line with parse and runs start on what it gave.
// It returns the exit code: 0 after --help, 2 for bad flags.
func Main[O any](component string, parse func([]string) (O, slog.Level, float32, error), start func(context.Context, O, kubernetes.Interface, clientv3.Interface) error) int {
	opts, level, qps, err := parse(os.Args[1:])
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	var netconf func() string
	if n, ok := any(opts).(interface{ CalicoNetconfGroup() string }); ok {
		netconf = n.CalicoNetconfGroup
	}
	return Run(component, level, qps, netconf, func(ctx context.Context, kube kubernetes.Interface, calico clientv3.Interface) error {
		return start(ctx, opts, kube, calico)
	})
}

// Flags are the flags both daemons take: --log-level and --datastore-qps.
type Flags struct {
	level string
	qps   float64
}

// Register adds them to fs; qpsNote, if any, ends the rate limit's help.
func (f *Flags) Register(fs *flag.FlagSet, defaultQPS float64, qpsNote string) {
	f.level, f.qps = "info", defaultQPS
	fs.StringVar(&f.level, "log-level", f.level, "debug, info, warn or error")
	fs.Float64Var(&f.qps, "datastore-qps", f.qps, "request rate limit of the Calico client on the Kubernetes datastore (libcalico-go's own default is 5)"+qpsNote)
}

// Resolve checks the parsed values.
func (f *Flags) Resolve(component string) (slog.Level, float32, error) {
	if f.qps <= 0 {
		return 0, 0, fmt.Errorf("%s: --datastore-qps must be positive", component)
	}
	var l slog.Level
	if err := l.UnmarshalText([]byte(f.level)); err != nil {
		return 0, 0, fmt.Errorf("%s: --log-level: %w", component, err)
	}
	return l, float32(f.qps), nil
}

// buildInfo is 1, labelled with the version stamped at link time: which
// release each agent and controller runs, during an upgrade above all.
func buildInfo() prometheus.Gauge {
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "capo_build_info",
		Help:        "1, labelled with the version capo was built as.",
		ConstLabels: prometheus.Labels{"version": version.Version, "goversion": runtime.Version()},
	})
	g.Set(1)
	return g
}

// decideCalicoAPI decides, once for the process, the API group Calico's
// resources are read and written in; the agent, the controller and
// capoctl then check that every type they use is served there.
func decideCalicoAPI(ctx context.Context, kube kubernetes.Interface, ds apiconfig.DatastoreType, netconf func() string) (apigroup.Mode, error) {
	nc := ""
	if netconf != nil && ds != apiconfig.EtcdV3 {
		nc = netconf()
	}
	dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return apigroup.DecideOnce(dctx, ds == apiconfig.EtcdV3, nc, kube.Discovery())
}
