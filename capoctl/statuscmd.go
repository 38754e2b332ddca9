package capoctl

import (
	"fmt"
	"io"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/capo-net/capo/pkg/version"
	"github.com/capo-net/capo/pkg/wire"
)

const defaultLease = "capo-controller"

func statusCmd(a *app) *cobra.Command {
	var wait bool
	var timeout time.Duration
	var lease string
	var nodes []string
	cmd := &cobra.Command{
		Use:   "status [--node N]... [--wait [--wait-timeout 5m]] [-o json|yaml|jsonpath=...]",
		Short: "Is capo working on every node",
		Long: `Per node: whether the agent is Ready and can reserve, whether capo-ipam is
in the CNI chain, the wire versions, the journal depth; the controller's
leader; Calico's version and API mode. Agents are read through the API
server's pod proxy (pods/proxy). Exits 1 when anything is not fine or cannot
be read; --wait waits until all is fine, or --wait-timeout.`,
		Args: cobra.NoArgs,
	}
	cmd.Flags().BoolVar(&wait, "wait", false, "wait until all is fine")
	cmd.Flags().DurationVar(&timeout, "wait-timeout", 5*time.Minute, "how long --wait waits")
	cmd.Flags().StringVar(&lease, "lease-name", defaultLease, "capo-controller's leader-election Lease, in --capo-namespace")
	cmd.Flags().StringSliceVar(&nodes, "node", nil, "only these nodes (repeat, or comma-separated)")
	o := addOutput(cmd, false)
	cmd.PreRunE = func(*cobra.Command, []string) error { return o.validate() }
	cmd.RunE = a.runs(func(c *cli, _ *cobra.Command, _ []string) error {
		r := c.collect(lease, nodes...)
		for deadline := time.Now().Add(timeout); wait && !r.OK && time.Now().Before(deadline); {
			fmt.Fprintf(c.errw, "waiting: %d problems, first: %s\n", len(r.Problems), r.Problems[0])
			select {
			case <-c.ctx.Done():
				return c.ctx.Err()
			case <-time.After(2 * time.Second):
			}
			c.now = time.Now()
			r = c.collect(lease, nodes...)
		}
		if err := o.print(c.out, r, func(bool) error { printStatus(c.out, r, c.now); return nil }); err != nil {
			return err
		}
		if !r.OK {
			return exitError{1}
		}
		return nil
	})
	return cmd
}

func printStatus(out io.Writer, r *report, now time.Time) {
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "NODE\tOPTED IN\tAGENT\tREADY\tCAN RESERVE\tIN CHAIN\tWIRE\tJOURNAL\tVERSION")
	for _, n := range r.Nodes {
		wireCol := "?"
		if n.WireVersion != 0 {
			wireCol = strconv.Itoa(n.WireVersion)
			if len(n.IPAMWire) > 0 {
				wireCol += " (capo-ipam " + strings.Join(n.IPAMWire, ",") + ")"
			}
		}
		can := yesNo(n.CanReserve)
		if n.NotReadyReason != "" {
			can += " (" + n.NotReadyReason + ")"
		}
		journal := "?"
		if n.JournalDepth != nil {
			journal = strconv.Itoa(*n.JournalDepth)
		}
		fmt.Fprintf(w, "%s\t%v\t%s\t%v\t%s\t%s\t%s\t%s\t%s\n", n.Node, n.OptedIn, orNone(n.Agent, ""), n.Ready, can, yesNo(n.CapoIPAMInChain), wireCol, journal, orNone(n.Version, ""))
	}
	_ = w.Flush()
	l := r.Leader
	switch {
	case l.Valid:
		fmt.Fprintf(out, "\nController: leader %s (Lease %s, renewed %s ago), version %s\n", l.Holder, l.Lease, human(now.Sub(*l.Renewed)), orNone(l.Version, ""))
	default:
		fmt.Fprintf(out, "\nController: no leader (Lease %s)\n", l.Lease)
	}
	fmt.Fprintf(out, "Calico: version %s, API %s, datastore ready %v\n", orNone(r.Calico.Version, ""), orNone(r.Calico.APIMode, ""), r.Calico.DatastoreReady)
	if r.OK {
		fmt.Fprintln(out, "\nAll fine.")
		return
	}
	fmt.Fprintln(out, "\nNot fine:")
	for _, p := range r.Problems {
		fmt.Fprintln(out, "  - "+p)
	}
}

func yesNo(b *bool) string {
	switch {
	case b == nil:
		return "?"
	case *b:
		return "yes"
	}
	return "no"
}

// versions is `capoctl version`.
type versions struct {
	Client     string            `json:"client"`
	GoVersion  string            `json:"goVersion"`
	Wire       int               `json:"wireVersion"`
	Agents     map[string]string `json:"agents,omitempty"` // node: version
	Controller string            `json:"controller,omitempty"`
	Calico     calicoStatus      `json:"calico"`
}

func versionCmd(a *app) *cobra.Command {
	var clientOnly bool
	var lease string
	cmd := &cobra.Command{
		Use:   "version [--client] [-o json|yaml]",
		Short: "capoctl's version, the agents', the controller's, and Calico's",
		Long: `capoctl's version; with a cluster, each agent's and the controller's as they
report them (capo_build_info on /metrics, else their image tag), and Calico's
version (ClusterInformation) and API mode.`,
		Args: cobra.NoArgs,
	}
	cmd.Flags().BoolVar(&clientOnly, "client", false, "only capoctl's; reach no cluster")
	cmd.Flags().StringVar(&lease, "lease-name", defaultLease, "capo-controller's leader-election Lease, in --capo-namespace")
	o := addOutput(cmd, false)
	cmd.PreRunE = func(*cobra.Command, []string) error { return o.validate() }
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		v := &versions{Client: version.Version, GoVersion: runtime.Version(), Wire: wire.Version}
		if clientOnly {
			return o.print(a.out, v, func(bool) error { printVersions(a.out, v); return nil })
		}
		return a.runs(func(c *cli, _ *cobra.Command, _ []string) error {
			r := c.collect(lease)
			v.Agents = map[string]string{}
			for _, n := range r.Nodes {
				if n.Agent != "" {
					v.Agents[n.Node] = orNone(n.Version, "")
				}
			}
			v.Controller, v.Calico = r.Leader.Version, r.Calico
			return o.print(c.out, v, func(bool) error { printVersions(c.out, v); return nil })
		})(cmd, args)
	}
	return cmd
}

func printVersions(out io.Writer, v *versions) {
	fmt.Fprintf(out, "Client: %s (%s, wire %d)\n", v.Client, v.GoVersion, v.Wire)
	if v.Agents == nil {
		return
	}
	byVersion := map[string][]string{}
	for node, ver := range v.Agents {
		byVersion[ver] = append(byVersion[ver], node)
	}
	vers := make([]string, 0, len(byVersion))
	for ver := range byVersion {
		vers = append(vers, ver)
	}
	sort.Strings(vers)
	for _, ver := range vers {
		nodes := byVersion[ver]
		sort.Strings(nodes)
		fmt.Fprintf(out, "Agents: %s on %d nodes (%s)\n", ver, len(nodes), strings.Join(nodes, ", "))
	}
	if len(v.Agents) == 0 {
		fmt.Fprintln(out, "Agents: none found")
	}
	fmt.Fprintf(out, "Controller: %s\n", orNone(v.Controller, ""))
	fmt.Fprintf(out, "Calico: %s, API %s\n", orNone(v.Calico.Version, ""), orNone(v.Calico.APIMode, ""))
}
