package plugin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
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

var _ Delegate = (*ExecDelegate)(nil)

// ExecDelegate finds the delegate in CNI_PATH and executes it the way a
// runtime would: same environment, CNI_COMMAND set, netconf on stdin.
type ExecDelegate struct {
	Paths  []string  // CNI_PATH, split
	Env    []string  // the environment capo-ipam was called with
	Stderr io.Writer // where the delegate's stderr goes
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
	for attempt := 0; ; attempt++ {
		out, err := d.run(ctx, path, command, stdin)
		switch {
		case err == nil:
			return out, nil
		case ctx.Err() != nil:
			return nil, fmt.Errorf("delegate %s %s did not answer within %s and was stopped: check that the Calico datastore is reachable and that no stuck process holds the IPAM lock; raise ipam.delegate_timeout if calls are merely slow", name, command, conf.IPAM.DelegateTimeout.D())
		case errors.Is(err, syscall.ETXTBSY) && attempt < busyRetries:
			select { // the writer is still copying: try again shortly
			case <-time.After(time.Second):
				continue
			case <-ctx.Done():
			}
		}
		var cniErr *types.Error
		if errors.As(err, &cniErr) {
			// Keep the delegate's code: the runtime acts on some (11: try again later).
			return nil, &types.Error{Code: cniErr.Code, Msg: fmt.Sprintf("delegate %s %s: %s", name, command, cniErr.Msg), Details: cniErr.Details}
		}
		return nil, fmt.Errorf("delegate %s %s: %w", name, command, err)
	}
}

func (d *ExecDelegate) find(name string) (string, error) {
	if p := findInPath(d.Paths, name); p != "" {
		return p, nil
	}
	return "", fmt.Errorf("delegate plugin %q is missing from CNI_PATH %q: install it there (calico-node installs calico-ipam) or fix ipam.delegate.type", name, strings.Join(d.Paths, ":"))
}

func (d *ExecDelegate) run(ctx context.Context, path, command string, stdin []byte) ([]byte, error) {
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, path)
	cmd.Env = withEnv(d.Env, "CNI_COMMAND", command)
	cmd.Stdin = bytes.NewReader(stdin)
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	// A grandchild holding our pipes must not outlive the deadline either.
	cmd.WaitDelay = 2 * time.Second
	err := cmd.Run()
	if d.Stderr != nil && stderr.Len() > 0 {
		_, _ = d.Stderr.Write(stderr.Bytes())
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
