package calicosuite

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"syscall"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Hostname is the host's name inside the harness's namespaces: Calico's
// suite names its nodes after it, and calico-ipam takes it as the node
// when the netconf names none.
const Hostname = "calico-suite"

// privateDirs are given an empty tmpfs of their own inside the namespaces:
// Calico's node state (/var/lib/calico, /var/run/calico), host-local's
// (/var/lib/cni), capo's (/var/lib/capo, /var/run/capo), the suite's
// network namespaces (/var/run/netns), and the kubeconfig every netconf of
// the suite names (/home/user/certs). Whole parents are covered, so that
// no mount point has to be made on the host.
var privateDirs = []string{"/home", "/var/lib", "/run"}

// StartPrivate starts argv in new mount, network and UTS namespaces; it
// dies with the calling goroutine's thread, which it locks.
func StartPrivate(argv []string, env []string) (*exec.Cmd, error) {
	runtime.LockOSThread() // Pdeathsig follows the thread that forks
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags: syscall.CLONE_NEWNS | syscall.CLONE_NEWNET | syscall.CLONE_NEWUTS,
		Pdeathsig:  syscall.SIGKILL,
	}
	if err := cmd.Start(); err != nil {
		runtime.UnlockOSThread()
		return nil, fmt.Errorf("entering private namespaces (needs root): %w", err)
	}
	return cmd, nil
}

// SetUpPrivateHost makes the new namespaces a host of their own: no mount
// propagates to the real host, the private dirs are empty, the hostname is
// Hostname, and loopback is up.
func SetUpPrivateHost() error {
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("making / private: %w", err)
	}
	if err := freshDirs(); err != nil {
		return err
	}
	if err := unix.Sethostname([]byte(Hostname)); err != nil {
		return fmt.Errorf("hostname: %w", err)
	}
	lo, err := netlink.LinkByName("lo")
	if err != nil {
		return err
	}
	return netlink.LinkSetUp(lo)
}

// freshDirs mounts an empty tmpfs on each private dir, over whatever an
// earlier run left there.
func freshDirs() error {
	for _, d := range privateDirs {
		if err := unix.Mount("tmpfs", d, "tmpfs", 0, "mode=0755"); err != nil {
			return fmt.Errorf("tmpfs on %s: %w", d, err)
		}
	}
	return os.MkdirAll("/home/user/certs", 0o755)
}

// dropDirs unmounts what freshDirs mounted last (lazily: a network
// namespace a failed spec left mounted must not keep the next run's state).
func dropDirs() {
	for _, d := range privateDirs {
		_ = unix.Unmount(d, unix.MNT_DETACH)
	}
}
