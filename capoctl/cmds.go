package capoctl

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/capo-net/capo/pkg/capoadopt"
	"github.com/capo-net/capo/pkg/reserve"
)

// filterFlags are list's and returns' --node, --pod, -n and -A.
type filterFlags struct {
	node, pod string
	all       bool
}

func addFilter(cmd *cobra.Command, f *filterFlags) {
	cmd.Flags().StringVar(&f.node, "node", "", "only this node's")
	cmd.Flags().StringVar(&f.pod, "pod", "", "only this pod's, as NAMESPACE/NAME")
	cmd.Flags().BoolVarP(&f.all, "all-namespaces", "A", false, "pods of every namespace (the default without -n)")
}

func (a *app) filter(cmd *cobra.Command, f *filterFlags) (filter, error) {
	ns, err := a.namespace(cmd, f.all)
	if err != nil {
		return filter{}, err
	}
	if f.pod != "" && !strings.Contains(f.pod, "/") {
		return filter{}, usageError{fmt.Errorf("--pod %q: want NAMESPACE/NAME", f.pod)}
	}
	return filter{node: f.node, namespace: ns, pod: f.pod}, nil
}

func listCmd(a *app) *cobra.Command {
	var f filterFlags
	cmd := &cobra.Command{
		Use:   "list [--node N] [-n NS | -A] [--pod NS/NAME] [-o json|yaml|wide|jsonpath=...]",
		Short: "Every address held, and the returns to returning pods",
		Long: `Every address held: pod, node, reason, age, and when it expires; then the
addresses given back to returning pods, or not, and why (Events).
A cluster that does not serve Calico's IPReservation type is an error, never
an empty list.`,
		Example: "  capoctl list -A -o wide\n  capoctl list --node worker-3 -o jsonpath='{.items[*].ip}'",
		Args:    cobra.NoArgs,
	}
	addFilter(cmd, &f)
	o := addOutput(cmd, true)
	var flt filter
	cmd.PreRunE = func(cmd *cobra.Command, _ []string) (err error) {
		if flt, err = a.filter(cmd, &f); err != nil {
			return err
		}
		return o.validate()
	}
	cmd.RunE = a.runs(func(c *cli, _ *cobra.Command, _ []string) error { return c.list(flt, o) })
	return cmd
}

func returnsCmd(a *app) *cobra.Command {
	var f filterFlags
	cmd := &cobra.Command{
		Use:   "returns [--node N] [-n NS | -A] [--pod NS/NAME] [-o json|yaml|jsonpath=...]",
		Short: "The history of returns to returning pods, oldest first",
		Args:  cobra.NoArgs,
	}
	addFilter(cmd, &f)
	o := addOutput(cmd, false)
	var flt filter
	cmd.PreRunE = func(cmd *cobra.Command, _ []string) (err error) {
		if flt, err = a.filter(cmd, &f); err != nil {
			return err
		}
		return o.validate()
	}
	cmd.RunE = a.runs(func(c *cli, _ *cobra.Command, _ []string) error { return c.listReturns(flt, o) })
	return cmd
}

func releaseCmd(a *app) *cobra.Command {
	var pod, node string
	var all, yes bool
	cmd := &cobra.Command{
		Use:   "release IP... | --pod NS/NAME | --node N | --all  [--yes]",
		Short: "End reservations now (asks first)",
		Long: `End reservations now (asks first); only the reservation goes, an address
still allocated in Calico IPAM stays allocated.`,
	}
	cmd.Flags().StringVar(&pod, "pod", "", "release this pod's, as NAMESPACE/NAME")
	cmd.Flags().StringVar(&node, "node", "", "release this node's")
	cmd.Flags().BoolVar(&all, "all", false, "every reservation capo holds, e.g. before uninstalling capo")
	cmd.Flags().BoolVarP(&yes, "yes", "y", false, "release without asking")
	// Checked before dialing; a wrong combination is exit 1, as it was.
	cmd.RunE = func(cmd *cobra.Command, ips []string) error {
		if err := releaseArgs(ips, pod, node, all); err != nil {
			return fmt.Errorf("capoctl release: %w", err)
		}
		return a.runs(func(c *cli, _ *cobra.Command, ips []string) error { return c.release(ips, pod, node, all, yes) })(cmd, ips)
	}
	return cmd
}

// releaseArgs checks what release was given before anything is dialed.
func releaseArgs(ips []string, pod, node string, all bool) error {
	if len(ips) == 0 && pod == "" && node == "" && !all {
		return fmt.Errorf("say what to release: addresses, --pod NAMESPACE/NAME, --node NODE, or --all")
	}
	if all && (len(ips) > 0 || pod != "" || node != "") {
		return fmt.Errorf("--all releases everything; give it alone")
	}
	for _, ip := range ips {
		if _, err := reserve.NormalizeAddr(ip); err != nil {
			return err
		}
	}
	return nil
}

func explainCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "explain NAMESPACE/NAME",
		Short: "Would this pod's address be reserved, and would it come back",
		Long: `Would this pod's address be reserved on teardown, and which rule decides;
would it get its address back when it returns, and if not why.`,
	}
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if len(args) != 1 {
			return errors.New("capoctl explain: explain takes one pod, as NAMESPACE/NAME")
		}
		if ns, name, ok := strings.Cut(args[0], "/"); !ok || ns == "" || name == "" {
			return fmt.Errorf("capoctl explain: %q: want NAMESPACE/NAME", args[0])
		}
		return a.runs(func(c *cli, _ *cobra.Command, args []string) error { return c.explain(args[0]) })(cmd, args)
	}
	return cmd
}

func adoptCmd(a *app) *cobra.Command {
	var ao adoptOptions
	cmd := &cobra.Command{
		Use:   "adopt-capo [--from-namespace ip-reserve] [--timezone ZONE] [--dry-run]",
		Short: "Take over the reservations of Capo (xdfdotcn/capo)",
		Long: `Take over the reservations of Capo (xdfdotcn/capo) with Capo's times, so
ipReserveTime and ipReserveMaxCount continue where Capo left off; skips
addresses Calico has allocated since; only reads Capo's objects; says per
address what it would adopt (--dry-run) or adopted; safe to repeat.

Capo's times carry no zone: they are its pod's wall clock. adopt-capo reads
the zone from the TZ value Capo's Deployment gives its manager, and where
that does not say it (Capo removed, TZ from a ConfigMap or envFrom, no TZ
and the image's localtime) it stops and asks for --timezone: a wrong zone
ends reservations early, so it never guesses.`,
		Args: cobra.NoArgs,
	}
	cmd.Flags().StringVar(&ao.namespace, "from-namespace", capoadopt.DefaultNamespace, "Capo's namespace, where its ConfigMap "+capoadopt.ConfigMapName+" is")
	cmd.Flags().StringVar(&ao.zone, "timezone", "", "the TZ Capo's manager ran with: its times carry no zone. Read from Capo's Deployment where it sets TZ to a value; needed where it does not (Capo removed, TZ from a ConfigMap, none set)")
	cmd.Flags().BoolVar(&ao.dryRun, "dry-run", false, "say what would be adopted, write nothing")
	cmd.RunE = a.runs(func(c *cli, cmd *cobra.Command, _ []string) error {
		r, err := dialCapo(a.cf)
		if err != nil {
			return err
		}
		return adopter{c}.adoptCapo(r, ao)
	})
	return cmd
}
