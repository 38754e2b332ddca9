// Command capo-install puts capo-ipam into a node's Calico CNI chain, takes
// it out, or checks it: capo-install install|uninstall|check.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/capo-net/capo/install"
	"github.com/capo-net/capo/pkg/kubeclient"
	"github.com/capo-net/capo/pkg/selection"
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
	socket := fs.String("agent-socket", "", "capo-ipam's agent_socket, if not the default")
	node := fs.String("node", os.Getenv("NODENAME"), "this node's name: check lists its pods whose fixed addresses the calico plugin rejects under capo-ipam (needs KUBECONFIG or in-cluster credentials)")
	stateDir := fs.String("state-dir", "", "capo-ipam's state_dir, if not the default")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), `capo-install %s: puts capo-ipam into this node's Calico CNI chain.

  install    copy capo-ipam into the CNI bin dir, then wrap the calico plugin's
             ipam block in the runtime's conflist as {"type": "capo-ipam",
             "delegate": <original>}; nothing else in the file changes
  uninstall  restore the original ipam block, then remove capo-ipam
  check      report, change nothing; exit 1 if something is wrong

Both are idempotent. Refused, with nothing changed: no calico plugin, an
ipam other than calico-ipam (Canal, host-local), a file that does not parse.

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
		var rep *install.Report
		rep, err = install.Check(o)
		if err != nil {
			break
		}
		full := checkReport{Report: rep}
		if *node != "" {
			full.FixedAddressPods, full.FixedAddressPodsNotChecked = fixedAddressPods(*node)
			if rep.Installed && len(full.FixedAddressPods) > 0 {
				rep.Problem = fmt.Sprintf("%d pods on this node carry fixed-address annotations the calico plugin rejects under capo-ipam; move them to nodes that are not opted in", len(full.FixedAddressPods))
			}
		}
		out = full
		if rep.Problem != "" {
			printJSON(stdout, out)
			return 1
		}
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

// checkReport is what check prints: the files, and the pods that will not
// start here while capo-ipam is installed.
type checkReport struct {
	*install.Report
	FixedAddressPods           []string `json:",omitempty"`
	FixedAddressPodsNotChecked string   `json:",omitempty"`
}

// fixedAddressPods lists the node's pods carrying Calico's fixed-address
// annotations, or says why it could not.
func fixedAddressPods(node string) ([]string, string) {
	kube, err := kubeclient.Kubernetes("capo-install", 5)
	if err != nil {
		return nil, err.Error()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pods, err := kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
	if err != nil {
		return nil, err.Error()
	}
	var out []string
	for i := range pods.Items {
		p := &pods.Items[i]
		if key := selection.FixedAddress(selection.Of(p)); key != "" {
			out = append(out, p.Namespace+"/"+p.Name+" ("+key+")")
		}
	}
	return out, ""
}
