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
	"path/filepath"
	"slices"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/capo-net/capo/pkg/capoadopt"
	"github.com/capo-net/capo/pkg/config"
	"github.com/capo-net/capo/pkg/reserve"
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

  capoctl adopt-capo [--from-namespace ip-reserve] [--timezone ZONE] [--dry-run]
      take over the reservations of Capo (xdfdotcn/capo) with Capo's times, so
      ipReserveTime and ipReserveMaxCount continue where Capo left off; skips
      addresses Calico has allocated since; only reads Capo's objects; says
      per address what it would adopt (--dry-run) or adopted; safe to repeat

  capoctl completion bash|zsh|fish
      a shell completion script, e.g. source <(capoctl completion bash)

Reaches the cluster as kubectl does (--kubeconfig, else KUBECONFIG's files
merged, else ~/.kube/config; --context; --as), and Calico's datastore in that
same cluster, unless DATASTORE_TYPE=etcdv3 (with ETCD_ENDPOINTS,
ETCD_CA_CERT_FILE, ...). Reads the config from the ConfigMap capo-config in
--capo-namespace.

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

// Run runs one capoctl command line and returns its exit code. argv0 is the
// name it was run by: as kubectl-capo, its usage says `kubectl capo`.
func Run(argv0 string, args []string, in io.Reader, out, errw io.Writer) int {
	return run(args, in, out, errw, connect, time.Now(), Name(argv0))
}

// Name is how the user calls capoctl: `kubectl capo` for the plugin.
func Name(argv0 string) string {
	if strings.HasPrefix(filepath.Base(argv0), "kubectl-") {
		return "kubectl capo"
	}
	return "capoctl"
}

// dialer reaches the Kubernetes API (for pods, nodes, the config) and the
// reservations; tests give fakes.
type dialer func(kubeFlags) (kubernetes.Interface, reserve.Store, error)

func run(args []string, in io.Reader, out, errw io.Writer, dial dialer, now time.Time, name string) int {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(errw)
	fs.Usage = func() {
		fmt.Fprintf(errw, strings.ReplaceAll(usage, "capoctl ", name+" "), version.Version)
		fs.PrintDefaults()
	}
	var k kubeFlags
	fs.StringVar(&k.kubeconfig, "kubeconfig", "", "the kubeconfig file, as kubectl's --kubeconfig")
	fs.StringVar(&k.context, "context", "", "the kubeconfig context, as kubectl's --context")
	fs.StringVar(&k.as, "as", "", "act as this user, as kubectl's --as")
	capoNS := fs.String("capo-namespace", "capo-system", "where capo runs: its capo-config ConfigMap")
	node := fs.String("node", "", "only this node's reservations (list, release, returns)")
	namespace := fs.String("namespace", "", "only pods of this namespace (list, returns)")
	fs.StringVar(namespace, "n", "", "short for --namespace")
	pod := fs.String("pod", "", "only this pod, as NAMESPACE/NAME (list, release, returns)")
	output := fs.String("o", "table", "list and returns output: table, json or yaml")
	yes := fs.Bool("yes", false, "release without asking")
	all := fs.Bool("all", false, "every reservation capo holds (release), e.g. before uninstalling capo")
	var ao adoptOptions
	fs.StringVar(&ao.namespace, "from-namespace", capoadopt.DefaultNamespace, "adopt-capo: Capo's namespace, where its ConfigMap "+capoadopt.ConfigMapName+" is")
	fs.StringVar(&ao.zone, "timezone", capoadopt.DefaultZone, "adopt-capo: the TZ of Capo's pod, which its times are written in without a zone (default: read from Capo's Deployment, else this)")
	fs.BoolVar(&ao.dryRun, "dry-run", false, "adopt-capo: say what would be adopted, write nothing")
	if len(args) == 0 {
		fs.Usage()
		return 2
	}
	cmd, rest := args[0], args[1:]
	// Usage and unknown commands are answered before reaching any cluster.
	if !slices.Contains(commands, cmd) {
		fs.Usage()
		if slices.Contains([]string{"-h", "-help", "--help", "help"}, cmd) {
			return 0
		}
		return 2
	}
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
	fs.Visit(func(f *flag.Flag) { ao.zoneSet = ao.zoneSet || f.Name == "timezone" })
	if cmd == "completion" {
		return completion(positional, fs, name, out, errw)
	}
	kube, store, err := dial(k)
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
	case "adopt-capo":
		var r capoReader
		if r, err = dialCapo(k); err == nil {
			err = c.adoptCapo(r, ao)
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

// confirm asks on stdin; anything but y/yes is no.
func (c *cli) confirm(question string) bool {
	fmt.Fprintf(c.out, "%s [y/N] ", question)
	var answer string
	_, _ = fmt.Fscanln(c.in, &answer)
	answer = strings.ToLower(strings.TrimSpace(answer))
	return answer == "y" || answer == "yes"
}
