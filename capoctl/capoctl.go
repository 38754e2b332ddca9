// Package capoctl is capoctl: it shows and ends capo's reservations, and
// explains whether a pod's address would be reserved. Installed as
// kubectl-capo it is also `kubectl capo`.
package capoctl

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/projectcalico/calico/libcalico-go/lib/apiconfig"
	"github.com/projectcalico/calico/libcalico-go/lib/clientv3"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/capo-net/capo/pkg/config"
	"github.com/capo-net/capo/pkg/reserve"
	"github.com/capo-net/capo/pkg/reserve/calicostore"
	"github.com/capo-net/capo/pkg/version"
)

const usage = `capoctl %s: capo's IP reservations.

  capoctl list [--node N] [--namespace NS] [--pod NS/NAME] [-o table|json|yaml]
      every address held: pod, node, reason, age, and when it expires; then
      the addresses given back to returning pods, or not, and why (Events)
  capoctl returns [--node N] [--namespace NS] [--pod NS/NAME] [-o table|json|yaml]
      only that history of returns, oldest first
  capoctl release IP... | --pod NS/NAME | --node N | --all  [--yes]
      end reservations now (asks first); only the reservation goes, an address
      still allocated in Calico IPAM stays allocated
  capoctl explain NS/NAME
      would this pod's address be reserved on teardown, and which rule decides;
      would it get its address back when it returns, and if not why

Reaches Calico's datastore as calicoctl does: the Kubernetes datastore through
KUBECONFIG (or ~/.kube/config) unless DATASTORE_TYPE=etcdv3 (with
ETCD_ENDPOINTS, ETCD_CA_CERT_FILE, ...). Reads the config from the ConfigMap
capo-config in --capo-namespace.

Flags:
`

// cli holds what every command needs.
type cli struct {
	ctx       context.Context
	kube      kubernetes.Interface
	store     reserve.Store
	capoNS    string
	in        io.Reader
	out, errw io.Writer
	now       time.Time
	cfg       *config.Config // read once, by config()
}

// Run runs one capoctl command line and returns its exit code.
func Run(args []string, in io.Reader, out, errw io.Writer) int {
	return run(args, in, out, errw, connect, time.Now())
}

// dialer reaches the Kubernetes API (for pods, nodes, the config) and the
// reservations; tests give fakes.
type dialer func() (kubernetes.Interface, reserve.Store, error)

func run(args []string, in io.Reader, out, errw io.Writer, dial dialer, now time.Time) int {
	fs := flag.NewFlagSet("capoctl", flag.ContinueOnError)
	fs.SetOutput(errw)
	fs.Usage = func() { fmt.Fprintf(errw, usage, version.Version); fs.PrintDefaults() }
	capoNS := fs.String("capo-namespace", "capo-system", "where capo runs: its capo-config ConfigMap")
	node := fs.String("node", "", "only this node's reservations (list, release, returns)")
	namespace := fs.String("namespace", "", "only pods of this namespace (list, returns)")
	pod := fs.String("pod", "", "only this pod, as NAMESPACE/NAME (list, release, returns)")
	output := fs.String("o", "table", "list and returns output: table, json or yaml")
	yes := fs.Bool("yes", false, "release without asking")
	all := fs.Bool("all", false, "every reservation capo holds (release), e.g. before uninstalling capo")
	if len(args) == 0 {
		fs.Usage()
		return 2
	}
	cmd, rest := args[0], args[1:]
	// Flags may come before, between or after the positional arguments.
	var positional []string
	for {
		if err := fs.Parse(rest); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return 0
			}
			return 2
		}
		if fs.NArg() == 0 {
			break
		}
		positional = append(positional, fs.Arg(0))
		rest = fs.Args()[1:]
	}
	kube, store, err := dial()
	if err != nil {
		fmt.Fprintln(errw, "capoctl:", err)
		return 1
	}
	c := &cli{ctx: context.Background(), kube: kube, store: store, capoNS: *capoNS, in: in, out: out, errw: errw, now: now}
	switch cmd {
	case "list":
		err = c.list(filter{node: *node, namespace: *namespace, pod: *pod}, *output)
	case "returns":
		err = c.listReturns(filter{node: *node, namespace: *namespace, pod: *pod}, *output)
	case "release":
		err = c.release(positional, *pod, *node, *all, *yes)
	case "explain":
		if len(positional) != 1 {
			err = errors.New("explain takes one pod, as NAMESPACE/NAME")
		} else {
			err = c.explain(positional[0])
		}
	default:
		fs.Usage()
		return 2
	}
	if err != nil {
		fmt.Fprintln(errw, "capoctl "+cmd+":", err)
		return 1
	}
	return 0
}

// connect reaches the Kubernetes API and Calico's datastore as kubectl and
// calicoctl would.
func connect() (kubernetes.Interface, reserve.Store, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	kcfg := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{})
	rest, err := kcfg.ClientConfig()
	if err != nil {
		return nil, nil, fmt.Errorf("kubeconfig: %w", err)
	}
	kube, err := kubernetes.NewForConfig(rest)
	if err != nil {
		return nil, nil, err
	}
	cfg := apiconfig.NewCalicoAPIConfig()
	if os.Getenv("DATASTORE_TYPE") == string(apiconfig.EtcdV3) {
		if cfg, err = apiconfig.LoadClientConfigFromEnvironment(); err != nil {
			return nil, nil, err
		}
	} else {
		cfg.Spec.DatastoreType = apiconfig.Kubernetes
		cfg.Spec.Kubeconfig = kubeconfigPath(rules)
		cfg.Spec.K8sClientQPS = 50
	}
	calico, err := clientv3.New(*cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("calico datastore: %w", err)
	}
	return kube, calicostore.New(calico, reserve.DefaultLimits), nil
}

// kubeconfigPath is the file kubectl would use.
func kubeconfigPath(rules *clientcmd.ClientConfigLoadingRules) string {
	if len(rules.Precedence) > 0 {
		for _, p := range rules.Precedence {
			if _, err := os.Stat(p); err == nil {
				return p
			}
		}
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".kube", "config")
}

// confirm asks on stdin; anything but y/yes is no.
func (c *cli) confirm(question string) bool {
	fmt.Fprintf(c.out, "%s [y/N] ", question)
	var answer string
	_, _ = fmt.Fscanln(c.in, &answer)
	answer = strings.ToLower(strings.TrimSpace(answer))
	return answer == "y" || answer == "yes"
}
