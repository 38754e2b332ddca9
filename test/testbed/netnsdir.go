package testbed

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// netnsRunDir is where ip netns and containerd keep network namespaces.
const netnsRunDir = "/run/netns"

// lockFile holds an exclusive lock on path (made if missing) until the
// returned file is closed.
func lockFile(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// EnsureNetnsMount makes /run/netns a shared mount point of its own, as
// `ip netns add` does on its first call, before anything on this machine
// mounts a network namespace there. The order matters on a machine where
// a real node's containerd and the test beds run side by side (make
// test's lanes): containerd mounts each pod's namespace on a file of the
// plain directory, and an `ip netns add` run after that binds the
// directory over itself, hiding those mounts under the bind. The kubelet
// then cannot remove a pod's namespace (unmounting it fails, and its file
// is "device or resource busy"), and the pod never goes. Once it is a
// mount point, ip only marks it shared and binds nothing.
func EnsureNetnsMount() error {
	if err := os.MkdirAll(netnsRunDir, 0o755); err != nil {
		return err
	}
	// One process at a time: two binds would stack.
	lock, err := lockFile(netnsRunDir + ".capo-lock")
	if err != nil {
		return err
	}
	defer lock.Close()
	err = unix.Mount("", netnsRunDir, "none", unix.MS_SHARED|unix.MS_REC, "")
	if err == nil {
		return nil // a mount point already
	}
	if !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("marking %s shared: %w", netnsRunDir, err)
	}
	if err := unix.Mount(netnsRunDir, netnsRunDir, "none", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("making %s a mount point: %w", netnsRunDir, err)
	}
	if err := unix.Mount("", netnsRunDir, "none", unix.MS_SHARED|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("marking %s shared: %w", netnsRunDir, err)
	}
	return nil
}
