package capoctl

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Completion is cobra's: `capoctl completion bash|zsh|fish|powershell`
// prints a script that asks capoctl itself (capoctl __complete ...), so
// pods, nodes and held addresses are completed from the cluster the
// other flags name. The plugin, kubectl-capo, is completed by kubectl
// (1.26 and later) through an executable kubectl_complete-capo on PATH
// that runs `kubectl capo __complete "$@"`.

// completionCmd prints cobra's completion scripts; bash's also completes
// kubectl-capo run by its own name.
func completionCmd(root *cobra.Command) *cobra.Command {
	return &cobra.Command{
		Use:       "completion bash|zsh|fish|powershell",
		Short:     "A shell completion script, e.g. source <(capoctl completion bash)",
		Long:      "A shell completion script, e.g. source <(capoctl completion bash).\n\nFor `kubectl capo` (kubectl 1.26 and later), put an executable kubectl_complete-capo on PATH\nthat runs: kubectl capo __complete \"$@\"",
		ValidArgs: []string{"bash", "zsh", "fish", "powershell"},
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageError{errors.New("give one shell: bash, zsh, fish or powershell")}
			}
			if !slices.Contains(cmd.ValidArgs, args[0]) {
				return usageError{fmt.Errorf("unknown shell %q: bash, zsh, fish or powershell", args[0])}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			out := cmd.OutOrStdout()
			switch args[0] {
			case "bash":
				if err := root.GenBashCompletionV2(out, true); err != nil {
					return err
				}
				_, err := fmt.Fprintln(out, "complete -o default -F __start_capoctl kubectl-capo")
				return err
			case "zsh":
				return root.GenZshCompletion(out)
			case "fish":
				return root.GenFishCompletion(out, true)
			}
			return root.GenPowerShellCompletionWithDesc(out)
		},
	}
}

type completer func(c *cli, toComplete string) []string

// registerCompletions adds dynamic completion to the commands and flags
// that name cluster objects.
func registerCompletions(a *app, root *cobra.Command) {
	for _, cmd := range root.Commands() {
		switch cmd.Name() {
		case "explain":
			cmd.ValidArgsFunction = a.complete(podNames, 1)
		case "release":
			cmd.ValidArgsFunction = a.complete(heldAddresses, -1)
		}
		if cmd.Flags().Lookup("node") != nil {
			_ = cmd.RegisterFlagCompletionFunc("node", a.complete(nodeNames, -1))
		}
		if cmd.Flags().Lookup("pod") != nil {
			_ = cmd.RegisterFlagCompletionFunc("pod", a.complete(podNames, -1))
		}
	}
	_ = root.RegisterFlagCompletionFunc("namespace", a.complete(namespaceNames, -1))
	_ = root.RegisterFlagCompletionFunc("capo-namespace", a.complete(namespaceNames, -1))
}

// complete runs fn against the cluster; max is how many positional
// arguments the command takes (-1: any). A cluster that cannot be reached
// completes nothing.
func (a *app) complete(fn completer, max int) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		if max >= 0 && len(args) >= max {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		c, err := a.connect(cmd)
		if err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		if c.ctx == nil {
			c.ctx = context.Background()
		}
		out := slices.DeleteFunc(fn(c, toComplete), func(s string) bool { return !strings.HasPrefix(s, toComplete) || slices.Contains(args, s) })
		d := cobra.ShellCompDirectiveNoFileComp
		if len(out) > 0 && strings.HasSuffix(out[0], "/") {
			d |= cobra.ShellCompDirectiveNoSpace
		}
		return out, d
	}
}

func nodeNames(c *cli, _ string) []string {
	nodes, err := c.kube.CoreV1().Nodes().List(c.ctx, metav1.ListOptions{})
	if err != nil {
		return nil
	}
	var out []string
	for _, n := range nodes.Items {
		out = append(out, n.Name)
	}
	return out
}

func namespaceNames(c *cli, _ string) []string {
	nss, err := c.kube.CoreV1().Namespaces().List(c.ctx, metav1.ListOptions{})
	if err != nil {
		return nil
	}
	var out []string
	for _, n := range nss.Items {
		out = append(out, n.Name)
	}
	return out
}

// podNames completes NAMESPACE/ first, then that namespace's pods.
func podNames(c *cli, toComplete string) []string {
	ns, _, ok := strings.Cut(toComplete, "/")
	if !ok {
		var out []string
		for _, n := range namespaceNames(c, "") {
			out = append(out, n+"/")
		}
		return out
	}
	pods, err := c.kube.CoreV1().Pods(ns).List(c.ctx, metav1.ListOptions{})
	if err != nil {
		return nil
	}
	var out []string
	for _, p := range pods.Items {
		out = append(out, ns+"/"+p.Name)
	}
	return out
}

// heldAddresses are the addresses capo holds, for release.
func heldAddresses(c *cli, _ string) []string {
	rows, err := c.rows(filter{})
	if err != nil {
		return nil
	}
	var out []string
	for _, r := range rows {
		out = append(out, r.IP)
	}
	return out
}
