package plugin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/containernetworking/cni/pkg/types"
)

// Delegate runs the original IPAM plugin for one CNI command.
type Delegate interface {
	// Invoke runs the delegate and returns what it wrote on stdout.
	Invoke(ctx context.Context, command string, conf *NetConf) ([]byte, error)
}

var (
	_ Delegate     = (*ExecDelegate)(nil)
	_ aheadStarter = (*ExecDelegate)(nil)
)

// aheadStarter is a Delegate that can start a call before its netconf is
// known, so that the delegate's start overlaps capo-ipam's question to the
// agent (see ExecDelegate.StartAhead).
type aheadStarter interface {
	StartAhead(ctx context.Context, command string, conf *NetConf)
	Stop()
}

// startAhead starts d's call for command ahead, if d can; the returned stop
// kills it if nothing used it.
func startAhead(ctx context.Context, d Delegate, command string, conf *NetConf) (stop func()) {
	s, ok := d.(aheadStarter)
	if !ok {
		return func() {}
	}
	s.StartAhead(ctx, command, conf)
	return s.Stop
}

// ExecDelegate finds the delegate in CNI_PATH and executes it the way a
// runtime would: same environment, CNI_COMMAND set, netconf on stdin.
type ExecDelegate struct {
	Paths  []string  // CNI_PATH, split
	Env    []string  // the environment capo-ipam was called with
	Stderr io.Writer // where the delegate's stderr goes

	ahead *aheadCall // a call started ahead of its netconf, until used or stopped
}

// busyRetries covers a delegate binary being replaced while we start it
// (calico-node's install-cni rewrites its binaries on start).
const busyRetries = 5

func (d *ExecDelegate) Invoke(ctx context.Context, command string, conf *NetConf) ([]byte, error) {
	name := conf.DelegateType()
	path, err := d.find(name)
	if err != nil {
		return nil, err
	}
	stdin := conf.DelegateNetConf()
	if s := d.takeAhead(command); s != nil {
		out, err := s.finish(stdin)
		if err == nil {
			return out, nil
		}
		return nil, d.explain(ctx, name, command, conf, err)
	}
	for attempt := 0; ; attempt++ {
		out, err := d.run(ctx, path, command, stdin)
		if err == nil {
			return out, nil
		}
		if errors.Is(err, syscall.ETXTBSY) && attempt < busyRetries && ctx.Err() == nil {
			select { // the writer is still copying: try again shortly
			case <-time.After(time.Second):
				continue
			case <-ctx.Done():
			}
		}
		return nil, d.explain(ctx, name, command, conf, err)
	}
}

// explain turns a failed run of the delegate into the error capo-ipam
// returns.
func (d *ExecDelegate) explain(ctx context.Context, name, command string, conf *NetConf, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("delegate %s %s did not answer within %s and was stopped: check that the Calico datastore is reachable and that no stuck process holds the IPAM lock; raise ipam.delegate_timeout if calls are merely slow", name, command, conf.IPAM.DelegateTimeout.D())
	}
	var cniErr *types.Error
	if errors.As(err, &cniErr) {
		// Keep the delegate's code: the runtime acts on some (11: try again later).
		return &types.Error{Code: cniErr.Code, Msg: fmt.Sprintf("delegate %s %s: %s", name, command, cniErr.Msg), Details: cniErr.Details}
	}
	return fmt.Errorf("delegate %s %s: %w", name, command, err)
}

// StartAhead starts the delegate for command before capo-ipam knows the
// netconf it will send: exec, the Go runtime and the delegate's package
// initialisation (several milliseconds for calico-ipam) then run while
// capo-ipam asks its agent, instead of after. The process waits on stdin,
// where a CNI plugin reads its netconf before it does anything; the next
// Invoke of the same command sends the netconf, Stop kills it unread.
// Nothing can be released or assigned before then: a capo-ipam that dies
// first closes the pipe, and the delegate fails on the empty netconf.
// Best effort: if it cannot start, Invoke starts it as usual.
//
// Only calico-ipam is started ahead: it reads stdin first (the CNI library's
// skel, as every plugin built on it), which is what makes this safe; any
// other delegate is started once its netconf is known.
func (d *ExecDelegate) StartAhead(ctx context.Context, command string, conf *NetConf) {
	d.Stop()
	if conf.DelegateType() != "calico-ipam" {
		return
	}
	path, err := d.find(conf.DelegateType())
	if err != nil {
		return
	}
	s := &aheadCall{command: command, stderr: d.Stderr}
	s.cmd = d.command(ctx, path, command, &s.stdout, &s.stderrBuf)
	if s.stdin, err = s.cmd.StdinPipe(); err != nil {
		return
	}
	if err := s.cmd.Start(); err != nil {
		slog.Debug("delegate not started ahead", "err", err)
		return
	}
	d.ahead = s
}

// Stop kills a delegate started ahead and not used; a no-op otherwise.
func (d *ExecDelegate) Stop() {
	if d.ahead != nil {
		d.ahead.stop()
		d.ahead = nil
	}
}

func (d *ExecDelegate) takeAhead(command string) *aheadCall {
	s := d.ahead
	if s == nil {
		return nil
	}
	d.ahead = nil
	if s.command != command {
		s.stop()
		return nil
	}
	return s
}

// aheadCall is a delegate process waiting for its netconf.
type aheadCall struct {
	command           string
	cmd               *exec.Cmd
	stdin             io.WriteCloser
	stdout, stderrBuf bytes.Buffer
	stderr            io.Writer
}

func (s *aheadCall) finish(netconf []byte) ([]byte, error) {
	_, werr := s.stdin.Write(netconf)
	_ = s.stdin.Close()
	err := s.cmd.Wait()
	if err == nil && werr != nil {
		err = werr
	}
	return delegateResult(err, &s.stdout, &s.stderrBuf, s.stderr)
}

func (s *aheadCall) stop() {
	_ = s.cmd.Process.Kill()
	_ = s.stdin.Close()
	_ = s.cmd.Wait()
}

func (d *ExecDelegate) find(name string) (string, error) {
	if p := findInPath(d.Paths, name); p != "" {
		return p, nil
	}
	return "", fmt.Errorf("delegate plugin %q is missing from CNI_PATH %q: install it there (calico-node installs calico-ipam) or fix ipam.delegate.type", name, strings.Join(d.Paths, ":"))
}

// command is the delegate's process for one CNI command.
func (d *ExecDelegate) command(ctx context.Context, path, command string, stdout, stderr *bytes.Buffer) *exec.Cmd {
	cmd := exec.CommandContext(ctx, path)
	cmd.Env = withEnv(d.Env, "CNI_COMMAND", command)
	cmd.Stdout = stdout
	cmd.Stderr = stderr
	// A grandchild holding our pipes must not outlive the deadline either.
	cmd.WaitDelay = 2 * time.Second
	return cmd
}

func (d *ExecDelegate) run(ctx context.Context, path, command string, stdin []byte) ([]byte, error) {
	var stdout, stderr bytes.Buffer
	cmd := d.command(ctx, path, command, &stdout, &stderr)
	cmd.Stdin = bytes.NewReader(stdin)
	return delegateResult(cmd.Run(), &stdout, &stderr, d.Stderr)
}

// delegateResult reads a delegate's outcome: its stdout, or an error carrying its
// CNI error or, failing that, the end of what it said. Its stderr goes on
// to errOut.
func delegateResult(err error, stdout, stderr *bytes.Buffer, errOut io.Writer) ([]byte, error) {
	if errOut != nil && stderr.Len() > 0 {
		_, _ = errOut.Write(stderr.Bytes())
	}
	if err == nil {
		return stdout.Bytes(), nil
	}
	var exitErr *exec.ExitError
	if !errors.As(err, &exitErr) {
		return nil, err
	}
	if cniErr := parseCNIError(stdout.Bytes()); cniErr != nil {
		return nil, cniErr
	}
	msg := strings.TrimSpace(stderr.String())
	if msg == "" {
		msg = strings.TrimSpace(stdout.String())
	}
	if len(msg) > 512 {
		msg = msg[len(msg)-512:]
	}
	return nil, fmt.Errorf("exited with %v and no CNI error: %q", exitErr, msg)
}

func parseCNIError(stdout []byte) *types.Error {
	var e types.Error
	if len(bytes.TrimSpace(stdout)) == 0 || json.Unmarshal(stdout, &e) != nil || (e.Code == 0 && e.Msg == "") {
		return nil
	}
	return &e
}

// withEnv returns env with key set to value, replacing any earlier value.
func withEnv(env []string, key, value string) []string {
	out := make([]string, 0, len(env)+1)
	for _, kv := range env {
		if !strings.HasPrefix(kv, key+"=") {
			out = append(out, kv)
		}
	}
	return append(out, key+"="+value)
}

// findInPath returns the first regular file called name in paths (CNI_PATH,
// split), as a runtime looks for a plugin; "" if none.
func findInPath(paths []string, name string) string {
	for _, dir := range paths {
		if dir == "" {
			continue
		}
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
			return p
		}
	}
	return ""
}
