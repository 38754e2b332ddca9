// Command capo-ipam-kube reads a pod's and its namespace's annotations from
// the API server, with the calico plugin's kubeconfig, and prints them as
// JSON. capo-ipam runs it from beside itself in the CNI bin dir, only when
// the node's capo-agent cannot answer an ADD; it is a program of its own so
// that capo-ipam, which runs for every pod, links no HTTPS client.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/capo-net/capo/pkg/version"
	"github.com/capo-net/capo/pkg/wire"
	"github.com/capo-net/capo/plugin/kubeapi"
)

func main() {
	fs := flag.NewFlagSet(wire.KubeHelper, flag.ContinueOnError)
	kubeconfig := fs.String("kubeconfig", "", "the kubeconfig to read the API server with (the calico plugin's kubernetes.kubeconfig)")
	namespace := fs.String("namespace", "", "the pod's namespace")
	pod := fs.String("pod", "", "the pod's name")
	timeout := fs.Duration("timeout", 10*time.Second, "give up after this long")
	agentPod := fs.String("agent-pod", "", "NAMESPACE/NAME: print whether this capo-agent pod exists ({\"exists\":bool}) instead of annotations")
	node := fs.String("node", "", "with --agent-pod: also print whether this node is still opted in to capo ({\"optedIn\":bool})")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), `%s %s: prints a pod's and its namespace's annotations, read from the API server,
as capo-ipam's ADD needs them when the node's capo-agent cannot answer.

  %s --kubeconfig /etc/cni/net.d/calico-kubeconfig --namespace NS --pod NAME

`, wire.KubeHelper, version.Version, wire.KubeHelper)
		fs.PrintDefaults()
	}
	if err := fs.Parse(os.Args[1:]); errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	} else if err != nil {
		os.Exit(2)
	}
	if *kubeconfig != "" && *agentPod != "" {
		os.Exit(agentPodExists(*kubeconfig, *agentPod, *node, *timeout))
	}
	if *kubeconfig == "" || *namespace == "" || *pod == "" {
		fmt.Fprintln(os.Stderr, wire.KubeHelper+": --kubeconfig, --namespace and --pod are all needed; see --help")
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	resp, err := kubeapi.Reader{Kubeconfig: *kubeconfig}.Get(ctx, wire.PodRef{Namespace: *namespace, Name: *pod})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if err := json.NewEncoder(os.Stdout).Encode(resp); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// agentPodExists answers capo-ipam's question "is capo gone?" for one
// step: does the pod the node's last capo-agent ran as still exist, and,
// when it names the node, is the node still opted in. Any answer it cannot
// read fails the whole: capo-ipam then keeps capo.
func agentPodExists(kubeconfig, ref, node string, timeout time.Duration) int {
	ns, name, ok := strings.Cut(ref, "/")
	if !ok || ns == "" || name == "" {
		fmt.Fprintln(os.Stderr, wire.KubeHelper+": --agent-pod takes NAMESPACE/NAME")
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	r := kubeapi.Reader{Kubeconfig: kubeconfig}
	exists, err := r.PodExists(ctx, ns, name)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	out := map[string]bool{"exists": exists}
	if node != "" {
		if out["optedIn"], err = r.NodeOptedIn(ctx, node); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	if err := json.NewEncoder(os.Stdout).Encode(out); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}
