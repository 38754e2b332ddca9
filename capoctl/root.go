package capoctl

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/capo-net/capo/pkg/version"
)

// app is one command line: its flags, and how to reach the cluster.
type app struct {
	dial      dialer
	in        io.Reader
	out, errw io.Writer
	now       time.Time
	cf        *kubeFlags
	capoNS    string
}

// connect dials the cluster once the command line has been checked.
func (a *app) connect(cmd *cobra.Command) (*cli, error) {
	cs, err := a.dial(a.cf)
	if err != nil {
		return nil, err
	}
	ctx := cmd.Context()
	if ctx == nil {
		ctx = context.Background()
	}
	return &cli{ctx: ctx, kube: cs.kube, store: cs.store, calico: cs.calico, exec: cs.exec, capoNS: a.capoNS, in: a.in, out: a.out, errw: a.errw, now: a.now}, nil
}

// namespace is -n when given, else "" (every namespace: reservations are
// the cluster's, not a namespace's); -A says so explicitly.
func (a *app) namespace(cmd *cobra.Command, all bool) (string, error) {
	set := cmd.Flags().Changed("namespace")
	if set && all {
		return "", usageError{fmt.Errorf("-n/--namespace and -A/--all-namespaces: give one")}
	}
	if set {
		return a.cf.overrides.Context.Namespace, nil
	}
	return "", nil
}

func newRoot(a *app, name string) *cobra.Command {
	root := &cobra.Command{
		Use:   "capoctl",
		Short: "capo's IP reservations",
		Long: name + ` shows and ends capo's IP reservations, explains whether a pod's address
would be reserved, says whether capo works on every node, and gathers a
support bundle.

It reaches the cluster as kubectl does (--kubeconfig, else KUBECONFIG's files
merged, else ~/.kube/config; --context, --as, ...), and Calico's datastore in
that same cluster, unless DATASTORE_TYPE=etcdv3 (with ETCD_ENDPOINTS,
ETCD_CA_CERT_FILE, ...). It reads capo's config from the ConfigMap
capo-config in --capo-namespace.`,
		Version:       version.Version,
		SilenceUsage:  true,
		SilenceErrors: true,
		Args:          unknownCommand,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_ = cmd.Help()
			return usageError{fmt.Errorf("give a command")}
		},
		CompletionOptions:          cobra.CompletionOptions{DisableDefaultCmd: true},
		SuggestionsMinimumDistance: 2,
	}
	if name != "capoctl" {
		root.Annotations = map[string]string{cobra.CommandDisplayNameAnnotation: name}
	}
	a.cf = &kubeFlags{}
	a.cf.addFlags(root.PersistentFlags())
	// Hidden as kubectl hides them: basic auth is gone from Kubernetes.
	_ = root.PersistentFlags().MarkHidden("username")
	_ = root.PersistentFlags().MarkHidden("password")
	root.PersistentFlags().StringVar(&a.capoNS, "capo-namespace", "capo-system", "where capo runs: its capo-config ConfigMap, agents, controller and Lease")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	root.AddCommand(listCmd(a), returnsCmd(a), releaseCmd(a), explainCmd(a), adoptCmd(a), versionCmd(a), statusCmd(a), bundleCmd(a), completionCmd(root))
	registerCompletions(a, root)
	return root
}

// errorPrefix names the command in an error, as capoctl always did:
// "capoctl list: ...".
func errorPrefix(cmd *cobra.Command) string {
	if cmd.Parent() == nil {
		return "capoctl:"
	}
	return "capoctl " + cmd.Name() + ":"
}

// runs wraps a command's work: connect, then do it.
func (a *app) runs(do func(c *cli, cmd *cobra.Command, args []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		c, err := a.connect(cmd)
		if err != nil {
			return fmt.Errorf("capoctl: %w", err)
		}
		if err := do(c, cmd, args); err != nil {
			if errors.As(err, new(exitError)) {
				return err
			}
			return fmt.Errorf("%s %w", errorPrefix(cmd), err)
		}
		return nil
	}
}

// unknownCommand refuses an argument where a command is expected, with
// cobra's suggestions: "lsit" is "list".
func unknownCommand(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.DisplayName())
	if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
		msg += "\n\nDid you mean this?\n\t" + strings.Join(s, "\n\t")
	}
	return usageError{errors.New(msg)}
}
