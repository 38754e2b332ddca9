package nodebed

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// CgroupRoot is the kubelet's cgroup root: every pod's processes live
// under it, in every controller's hierarchy, and nothing else does.
const CgroupRoot = "/capo-node"

const netnsDir = "/run/netns"

// sweepRuntime ends what the node left running and mounted: the pods'
// processes (by cgroup), containerd's shims (by the socket they serve),
// the mounts under the bed's dirs, containerd's network namespaces and
// the pods' cgroups. It runs after a normal stop and, for a killed run,
// before the next one starts.
func sweepRuntime(logf func(string, ...any)) error {
	killPids(podPids(), "pod process", logf)
	killPids(shimPids(), "containerd shim", logf)
	var errs []error
	if err := unmountUnder(append([]string{Root, State, netnsDir + "/cni-"}, HostPaths...)); err != nil {
		errs = append(errs, err)
	}
	netns, _ := filepath.Glob(filepath.Join(netnsDir, "cni-*"))
	for _, n := range netns {
		if err := os.Remove(n); err != nil {
			errs = append(errs, err)
		}
	}
	if err := removeCgroups(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// podPids are the processes in the kubelet's cgroups.
func podPids() []int { return cgroupPids(CgroupRoot) }

// cgroupPids are the processes in the cgroups under root.
func cgroupPids(root string) []int {
	var pids []int
	_ = filepath.WalkDir(filepath.Join("/sys/fs/cgroup/pids", root), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.Name() != "cgroup.procs" {
			return nil
		}
		b, _ := os.ReadFile(p)
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil {
				pids = append(pids, pid)
			}
		}
		return nil
	})
	return pids
}

// shimPids are the containerd shims serving the bed's containerd.
func shimPids() []int { return socketShimPids(ContainerdSocket) }

// socketShimPids are the containerd shims serving the containerd of socket.
func socketShimPids(socket string) []int {
	return pidsWhere(func(args []string) bool {
		return strings.HasPrefix(filepath.Base(args[0]), "containerd-shim") && slices.Contains(args, socket)
	})
}

// pidsWhere are the machine's processes, this one aside, whose command line
// (its arguments, never empty) match says yes to.
func pidsWhere(match func(args []string) bool) []int {
	var pids []int
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		if !match(strings.Split(string(b), "\x00")) {
			continue
		}
		if pid, err := strconv.Atoi(filepath.Base(filepath.Dir(p))); err == nil && pid != os.Getpid() {
			pids = append(pids, pid)
		}
	}
	return pids
}

func killPids(pids []int, what string, logf func(string, ...any)) {
	if len(pids) > 0 {
		logf("nodebed: ending %d %s(es) of the node", len(pids), what)
	}
	for _, pid := range pids {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	deadline := time.Now().Add(10 * time.Second)
	for _, pid := range pids {
		for syscall.Kill(pid, 0) == nil && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// unmountUnder detaches every mount at or below the given path prefixes,
// deepest first.
func unmountUnder(prefixes []string) error {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return err
	}
	defer f.Close()
	var targets []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		mp := unescapeMount(fields[4])
		for _, pre := range prefixes {
			if mp == pre || strings.HasPrefix(mp, strings.TrimSuffix(pre, "/")+"/") || (strings.HasSuffix(pre, "-") && strings.HasPrefix(mp, pre)) {
				targets = append(targets, mp)
				break
			}
		}
	}
	slices.SortFunc(targets, func(a, b string) int { return len(b) - len(a) })
	var errs []error
	for _, t := range targets {
		if err := syscall.Unmount(t, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOENT) {
			errs = append(errs, fmt.Errorf("unmounting %s: %w", t, err))
		}
	}
	return errors.Join(errs...)
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	r, err := strconv.Unquote(`"` + strings.ReplaceAll(s, `"`, `\"`) + `"`)
	if err != nil {
		return s
	}
	return r
}

// removeCgroups removes the kubelet's cgroup tree in every hierarchy,
// leaves first (a cgroup with children or processes cannot go).
func removeCgroups() error { return removeCgroupsAt(CgroupRoot) }

// removeCgroupsAt removes the cgroup tree root in every hierarchy.
func removeCgroupsAt(root string) error {
	roots, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup/*", root))
	var errs []error
	for _, top := range roots {
		var dirs []string
		_ = filepath.WalkDir(top, func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		slices.SortFunc(dirs, func(a, b string) int { return len(b) - len(a) })
		for _, d := range dirs {
			if err := syscall.Rmdir(d); err != nil && !errors.Is(err, syscall.ENOENT) {
				errs = append(errs, fmt.Errorf("removing cgroup %s: %w", d, err))
			}
		}
	}
	return errors.Join(errs...)
}
