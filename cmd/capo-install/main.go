// Command capo-install puts capo-ipam into a node's Calico CNI chain, takes
// it out, or checks it: capo-install install|uninstall|check.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/client-go/kubernetes"

	"github.com/capo-net/capo/install"
	"github.com/capo-net/capo/pkg/kubeclient"
	"github.com/capo-net/capo/pkg/version"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("capo-install", flag.ContinueOnError)
	fs.SetOutput(stderr)
	self, _ := os.Executable()
	o := install.Options{}
	fs.StringVar(&o.CNIBinDir, "cni-bin-dir", "/opt/cni/bin", "the runtime's CNI bin dir, as this process sees it")
	fs.StringVar(&o.CNIConfDir, "cni-conf-dir", "/etc/cni/net.d", "the runtime's CNI conf dir, as this process sees it")
	fs.StringVar(&o.Source, "source", filepath.Join(filepath.Dir(self), "capo-ipam"), "the capo-ipam binary to install")
	fs.StringVar(&o.HelperSource, "helper-source", "", "the capo-ipam-kube binary to install beside it (default: beside --source)")
	socket := fs.String("agent-socket", "", "capo-ipam's agent_socket, if not the default")
	node := fs.String("node", os.Getenv("NODENAME"), "this node's name: check lists its pods whose fixed addresses the calico plugin rejects under capo-ipam (needs KUBECONFIG or in-cluster credentials)")
	stateDir := fs.String("state-dir", "", "capo-ipam's state_dir, if not the default")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), `capo-install %s: puts capo-ipam into this node's Calico CNI chain.

  install    copy capo-ipam and capo-ipam-kube (which capo-ipam runs to read
             the API server when the agent is away) into the CNI bin dir,
             then wrap the calico plugin's ipam block in the runtime's
             conflist as {"type": "capo-ipam", "delegate": <original>};
             nothing else in the file changes
  uninstall  restore the original ipam block, then remove both binaries
  check      report, change nothing; exit 1 if something is wrong

install and uninstall are idempotent (run twice, the second changes
nothing); check never changes anything. Refused, with nothing changed: no
calico plugin, an ipam other than calico-ipam (Canal, host-local), a file
that does not parse.

Flags:
`, version.Version)
		fs.PrintDefaults()
	}
	cmd := ""
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		cmd, args = args[0], args[1:] // capo-install install --flags
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if cmd == "" {
		cmd = fs.Arg(0) // capo-install --flags install
	}
	if *socket != "" || *stateDir != "" {
		o.IPAMExtra = map[string]any{}
		if *socket != "" {
			o.IPAMExtra["agent_socket"] = *socket
		}
		if *stateDir != "" {
			o.IPAMExtra["state_dir"] = *stateDir
		}
	}
	var out any
	var err error
	switch cmd {
	case "install":
		out, err = install.Install(o)
	case "uninstall":
		out, err = install.Uninstall(o)
	case "check":
		var rep *install.NodeReport
		rep, err = install.CheckNode(o, *node, func() (kubernetes.Interface, error) { return kubeclient.Kubernetes("capo-install", 5) })
		if err == nil && rep.Problem != "" {
			printJSON(stdout, rep)
			return 1
		}
		out = rep
	default:
		fs.Usage()
		return 2
	}
	if err != nil {
		fmt.Fprintf(stderr, "capo-install %s: %v\n", cmd, err)
		return 1
	}
	printJSON(stdout, out)
	return 0
}

func printJSON(w io.Writer, v any) {
	b, _ := json.MarshalIndent(v, "", "  ")
	fmt.Fprintln(w, string(b))
}
