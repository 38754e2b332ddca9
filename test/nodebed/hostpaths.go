package nodebed

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
)

// The bed's own directories: containerd's and the kubelet's state, images,
// logs. Nothing else on the host uses them.
const (
	Root  = "/var/lib/capo-node" // persistent state of this run
	State = "/run/capo-node"     // sockets and runtime state
)

// HostPaths are the node's own paths the bed takes over for its run: the
// chart's host paths (CNI dirs, capo's state and socket dirs), what Calico's
// CNI plugin and the kubelet write outside their configured dirs, and
// containerd's shim sockets. Whatever was there before is moved aside and
// put back afterwards.
var HostPaths = []string{
	"/opt/cni", "/etc/cni",
	"/var/lib/capo", "/var/run/capo",
	"/var/lib/calico", "/var/run/calico", "/var/log/calico",
	"/var/log/containers", "/var/log/pods",
	"/run/containerd",
}

const savedSuffix = ".capo-node-saved"

// takeOver records which HostPaths exist, moves existing ones aside and
// creates them empty. The record lets restoreHost undo it, also in a later
// run when this one was killed.
func takeOver() error {
	var existed []string
	for _, p := range HostPaths {
		if _, err := os.Lstat(p); err == nil {
			existed = append(existed, p)
		}
	}
	b, _ := json.Marshal(existed)
	if err := os.MkdirAll(Root, 0o700); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(Root, "host-paths.json"), b, 0o600); err != nil {
		return err
	}
	for _, p := range HostPaths {
		if slices.Contains(existed, p) {
			if err := os.Rename(p, p+savedSuffix); err != nil {
				return fmt.Errorf("moving %s aside for the bed's run: %w", p, err)
			}
		}
		if err := os.MkdirAll(p, 0o755); err != nil {
			return err
		}
	}
	for _, d := range []string{CNIBinDir, CNIConfDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	return nil
}

// restoreHost removes the bed's HostPaths and puts back what was there,
// from the record takeOver wrote. Unmount everything under them first.
func restoreHost() error {
	b, err := os.ReadFile(filepath.Join(Root, "host-paths.json"))
	if err != nil {
		return fmt.Errorf("no record of the host paths the bed took over: %w", err)
	}
	var existed []string
	if err := json.Unmarshal(b, &existed); err != nil {
		return err
	}
	var errs []error
	for _, p := range HostPaths {
		_, saveErr := os.Lstat(p + savedSuffix)
		switch {
		case slices.Contains(existed, p) && saveErr != nil:
			continue // never moved aside: the original is still in place
		case slices.Contains(existed, p):
			if err := os.RemoveAll(p); err != nil {
				errs = append(errs, err)
			} else if err := os.Rename(p+savedSuffix, p); err != nil {
				errs = append(errs, fmt.Errorf("putting %s back: %w", p, err))
			}
		default:
			if err := os.RemoveAll(p); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return os.Remove(filepath.Join(Root, "host-paths.json"))
}

// tookOver reports whether an earlier run's takeover is still in place.
func tookOver() bool {
	_, err := os.Stat(filepath.Join(Root, "host-paths.json"))
	return err == nil
}
