// Package plugin is capo-ipam, the IPAM plugin Calico calls in place of
// calico-ipam. It hands every command to the original IPAM plugin (the
// delegate) with the netconf Calico sent, only the ipam block swapped back.
package plugin

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/cni/pkg/types/create"
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

// setup parses the netconf and builds the real dependencies for one call.
func setup(args *skel.CmdArgs) (*NetConf, *ExecDelegate, func(), error) {
	conf, err := ParseNetConf(args.StdinData)
	if err != nil {
		return nil, nil, nil, err
	}
	closeLog := configureLogging(conf.IPAM.LogLevel, conf.IPAM.LogFile, args.ContainerID)
	d := &ExecDelegate{Paths: filepath.SplitList(args.Path), Env: os.Environ(), Stderr: os.Stderr}
	return conf, d, closeLog, nil
}

func cmdAdd(args *skel.CmdArgs) error {
	conf, d, done, err := setup(args)
	if err != nil {
		return err
	}
	defer done()
	ctx, cancel := context.WithTimeout(context.Background(), conf.IPAM.DelegateTimeout.D())
	defer cancel()
	return add(ctx, args, conf, d, journal.Dir{Root: conf.IPAM.StateDir}, os.Stdout)
}

func cmdDel(args *skel.CmdArgs) error {
	conf, d, done, err := setup(args)
	if err != nil {
		return blocking(err)
	}
	defer done()
	// The agent's deadline runs inside this one; the delegate gets its own.
	ctx, cancel := context.WithTimeout(context.Background(), conf.IPAM.AgentTimeout.D()+conf.IPAM.DelegateTimeout.D())
	defer cancel()
	deps := delDeps{
		agent:    wire.NewClient(conf.IPAM.AgentSocket),
		delegate: d,
		journal:  journal.Dir{Root: conf.IPAM.StateDir},
		rollback: parentIsAdding(),
		env:      cniEnv(),
	}
	return blocking(del(ctx, args, conf, deps))
}

func cmdCheck(args *skel.CmdArgs) error {
	conf, d, done, err := setup(args)
	if err != nil {
		return err
	}
	defer done()
	ctx, cancel := context.WithTimeout(context.Background(), conf.IPAM.DelegateTimeout.D())
	defer cancel()
	return check(ctx, conf, d)
}

// add returns the delegate's result unchanged: stdout carries it verbatim.
// The addresses are recorded for the DEL; if that fails the DEL reads
// Calico's handle instead, so the ADD does not fail for it.
func add(ctx context.Context, args *skel.CmdArgs, conf *NetConf, d Delegate, j Journal, stdout io.Writer) error {
	out, err := d.Invoke(ctx, "ADD", conf)
	if err != nil {
		slog.Error("ADD failed", "err", err)
		return err
	}
	ips, err := resultIPs(conf.CNIVersion, out)
	if err == nil {
		err = j.RecordAddrs(conf.Name, args.ContainerID, args.IfName, ips)
	}
	if err != nil {
		slog.Warn("could not record the ADD's addresses; DEL will read Calico's handle", "err", err)
	}
	if _, err := stdout.Write(out); err != nil {
		return fmt.Errorf("writing the result: %w", err)
	}
	slog.Info("ADD delegated", "delegate", conf.DelegateType(), "ips", ips)
	return nil
}

// resultIPs reads the addresses from a delegate result of any CNI version.
func resultIPs(cniVersion string, out []byte) ([]string, error) {
	if cniVersion == "" {
		cniVersion = "0.1.0"
	}
	r, err := create.Create(cniVersion, out)
	if err != nil {
		return nil, err
	}
	cur, err := current.NewResultFromResult(r)
	if err != nil {
		return nil, err
	}
	var ips []string
	for _, ip := range cur.IPs {
		ips = append(ips, ip.Address.IP.String())
	}
	return ips, nil
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
