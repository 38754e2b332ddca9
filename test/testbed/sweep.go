package testbed

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

const (
	dirPrefix   = "capo-testbed-"
	netnsPrefix = "capo-tb-" // capo-tb-<pid>-<n>
	netnsDir    = "/var/run/netns"
)

// sweepStale removes what an earlier, killed run left behind: its network
// namespaces and its work dir. Its servers died with it (Pdeathsig).
func sweepStale(logf func(string, ...any)) {
	entries, _ := os.ReadDir(netnsDir)
	for _, e := range entries {
		if pid, ok := ownerPID(e.Name(), netnsPrefix); ok && !alive(pid) {
			logf("testbed: removing stale netns %s", e.Name())
			deleteNetNS(e.Name())
		}
	}
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), dirPrefix+"*"))
	for _, d := range dirs {
		if pid, ok := ownerPID(filepath.Base(d), dirPrefix); ok && !alive(pid) {
			logf("testbed: removing stale dir %s", d)
			_ = os.RemoveAll(d)
		}
	}
}

func ownerPID(name, prefix string) (int, bool) {
	rest, ok := strings.CutPrefix(name, prefix)
	if !ok {
		return 0, false
	}
	rest, _, _ = strings.Cut(rest, "-")
	pid, err := strconv.Atoi(rest)
	return pid, err == nil && pid > 0
}

func alive(pid int) bool {
	return pid == os.Getpid() || syscall.Kill(pid, 0) == nil
}
