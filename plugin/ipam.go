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
	"github.com/containernetworking/cni/pkg/version"
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
	return add(ctx, conf, d, os.Stdout)
}

func cmdDel(args *skel.CmdArgs) error {
	conf, d, done, err := setup(args)
	if err != nil {
		return blocking(err)
	}
	defer done()
	ctx, cancel := context.WithTimeout(context.Background(), conf.IPAM.DelegateTimeout.D())
	defer cancel()
	return blocking(del(ctx, conf, d))
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
func add(ctx context.Context, conf *NetConf, d Delegate, stdout io.Writer) error {
	out, err := d.Invoke(ctx, "ADD", conf)
	if err != nil {
		slog.Error("ADD failed", "err", err)
		return err
	}
	if _, err := stdout.Write(out); err != nil {
		return fmt.Errorf("writing the result: %w", err)
	}
	slog.Info("ADD delegated", "delegate", conf.DelegateType())
	return nil
}

func del(ctx context.Context, conf *NetConf, d Delegate) error {
	if _, err := d.Invoke(ctx, "DEL", conf); err != nil {
		slog.Error("DEL failed", "err", err)
		return err
	}
	slog.Info("DEL delegated", "delegate", conf.DelegateType())
	return nil
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
