// Package plugin is capo-ipam, the IPAM plugin Calico calls in place of
// calico-ipam. It hands every command to the original IPAM plugin (the
// delegate) with the netconf Calico sent, only the ipam block swapped back.
package plugin

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"time"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/cni/pkg/version"

	"github.com/capo-net/capo/pkg/journal"
	"github.com/capo-net/capo/pkg/wire"
)

// SupportedVersions are the CNI versions Calico's conflists use.
var SupportedVersions = version.PluginSupports("0.1.0", "0.2.0", "0.3.0", "0.3.1", "0.4.0", "1.0.0")

// Funcs wires the CNI verbs for skel, each guarded against panics: a panic
// must reach the runtime as a CNI error, never as a crash with empty stdout.
func Funcs() skel.CNIFuncs {
	return skel.CNIFuncs{Add: guard(cmdAdd), Del: guard(cmdDel), Check: guard(cmdCheck)}
}

func guard(f func(*skel.CmdArgs) error) func(*skel.CmdArgs) error {
	return func(args *skel.CmdArgs) (err error) {
		defer func() {
			if r := recover(); r != nil {
				slog.Error("panic", "panic", r, "stack", string(debug.Stack()))
				err = fmt.Errorf("capo-ipam internal error (please report): %v", r)
			}
		}()
		return f(args)
	}
}

// call is one CNI invocation's real dependencies: the netconf, the
// delegate, the journal, a deadline, and the log.
type call struct {
	ctx     context.Context
	conf    *NetConf
	d       *ExecDelegate
	journal journal.Dir
	done    func()
}

// setup parses the netconf and builds the call. The deadline is the
// delegate's, plus the agent's for a DEL, which asks the agent first.
func setup(args *skel.CmdArgs, withAgent bool) (*call, error) {
	conf, err := ParseNetConf(args.StdinData)
	if err != nil {
		return nil, err
	}
	closeLog := configureLogging(conf.IPAM.LogLevel, conf.IPAM.LogFile, args.ContainerID)
	timeout := conf.IPAM.DelegateTimeout.D()
	if withAgent {
		timeout += conf.IPAM.AgentTimeout.D()
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	return &call{
		ctx:     ctx,
		conf:    conf,
		d:       &ExecDelegate{Paths: filepath.SplitList(args.Path), Env: os.Environ(), Stderr: os.Stderr},
		journal: journal.Dir{Root: conf.IPAM.StateDir},
		done:    func() { cancel(); closeLog() },
	}, nil
}

func cmdAdd(args *skel.CmdArgs) error {
	st := newSteps()
	c, err := setup(args, false)
	if err != nil {
		return err
	}
	defer c.done()
	st.done("setup")
	agent := wire.NewClient(c.conf.IPAM.AgentSocket)
	ann := agentAnnotations{agent: agent, network: c.conf.Name, timeout: 2 * time.Second, awaited: teardownAwaited(c.journal), retry: 250 * time.Millisecond}
	if kc := c.conf.calico.Kubernetes.Kubeconfig; kc != "" {
		ann.fallback = kubeAnnotations{kubeconfig: kc, paths: c.d.Paths}
	}
	err = add(c.ctx, args, c.conf, addDeps{delegate: c.d, journal: c.journal, ann: ann, reporter: agent, stdout: os.Stdout, steps: st})
	st.log("ADD steps")
	return err
}

func cmdDel(args *skel.CmdArgs) error {
	st := newSteps()
	c, err := setup(args, true)
	if err != nil {
		return blocking(err)
	}
	defer c.done()
	deps := delDeps{
		agent:    wire.NewClient(c.conf.IPAM.AgentSocket),
		delegate: c.d,
		journal:  c.journal,
		rollback: parentIsAdding(),
		env:      cniEnv(),
		steps:    st,
		gone:     goneCheck{stateDir: c.conf.IPAM.StateDir, kubeconfig: c.conf.calico.Kubernetes.Kubeconfig, paths: c.d.Paths, now: time.Now, after: c.conf.IPAM.UninstalledAfter.D()}.gone,
	}
	st.done("setup")
	err = del(c.ctx, args, c.conf, deps)
	st.log("DEL steps")
	return blocking(err)
}

func cmdCheck(args *skel.CmdArgs) error {
	c, err := setup(args, false)
	if err != nil {
		return err
	}
	defer c.done()
	return check(c.ctx, c.conf, c.d)
}

func check(ctx context.Context, conf *NetConf, d Delegate) error {
	if _, err := d.Invoke(ctx, "CHECK", conf); err != nil {
		slog.Error("CHECK failed", "err", err)
		return err
	}
	return nil
}

// blocking keeps a DEL error blocking: containerd treats a DEL error that says
// "not found" or "no such file or directory" as success and moves on, which
// for capo would mean an address the runtime thinks is gone.
func blocking(err error) error {
	if err == nil {
		return nil
	}
	r := strings.NewReplacer("not found", "missing", "Not Found", "Missing", "no such file or directory", "ENOENT")
	if e, ok := err.(*types.Error); ok {
		return &types.Error{Code: e.Code, Msg: r.Replace(e.Msg), Details: r.Replace(e.Details)}
	}
	if msg := r.Replace(err.Error()); msg != err.Error() {
		return fmt.Errorf("%s", msg)
	}
	return err
}
