package daemon

import (
	"bufio"
	"bytes"
	"log/slog"
	"os"
	"runtime/debug"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// MemoryLimitEnv holds the container's memory limit in bytes, as the
// chart passes it (a resourceFieldRef on limits.memory).
const MemoryLimitEnv = "CAPO_MEMORY_LIMIT"

// goShare is the part of the container's limit the Go runtime may use
// before it collects harder: the rest is for the executable's mapped
// pages, which the kernel counts against the container but the runtime
// does not count.
const goShare = 0.75

// gcPercent is the daemons' GOGC unless the environment sets one: the heap
// may grow by half its live size between collections, not by all of it.
// A daemon's live heap is a few MiB and its work a few requests a second,
// so collecting twice as often costs little CPU and keeps a burst of
// teardowns from doubling the heap.
const gcPercent = 50

// LimitMemory sets the Go runtime's soft memory limit from the container's,
// unless GOMEMLIMIT sets it already, and collects at gcPercent unless GOGC
// says otherwise.
func LimitMemory() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(gcPercent)
	}
	limit, ok := goMemoryLimit(os.Getenv)
	if !ok {
		return
	}
	debug.SetMemoryLimit(limit)
	slog.Info("Go memory limit set from the container's", "bytes", limit)
}

// goMemoryLimit is the limit LimitMemory sets, from the environment.
func goMemoryLimit(getenv func(string) string) (int64, bool) {
	if getenv("GOMEMLIMIT") != "" {
		return 0, false
	}
	limit, err := strconv.ParseInt(getenv(MemoryLimitEnv), 10, 64)
	if err != nil || limit <= 0 {
		return 0, false
	}
	return int64(float64(limit) * goShare), true
}

// ReleaseStartupMemory hands back to the kernel, once a daemon has
// started, what starting needed and running does not: the heap the
// informers' first lists left free, and the executable's pages. Starting
// touches most of the binary (every package's init): tens of MiB resident
// that a running daemon never reads again; the kernel pages back in what
// is read later. Where it cannot (before Linux 5.4), the pages stay.
//
// The executable is then marked as read at random (MADV_RANDOM): a page
// the daemon needs again is read alone, not with the 128 KiB around it the
// kernel reads ahead by default, which it would also map into the daemon.
// The code a running daemon uses is scattered thinly through the binary;
// read-around made each of its pages cost the daemon up to 32.
func ReleaseStartupMemory() {
	debug.FreeOSMemory()
	releaseExecutable()
}

func releaseExecutable() {
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		return
	}
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return
	}
	released := 0
	for _, r := range readOnlyMappings(maps, exe) {
		_, _, errno := unix.Syscall(unix.SYS_MADVISE, r[0], r[1]-r[0], unix.MADV_PAGEOUT)
		if errno != 0 {
			slog.Debug("startup pages kept", "err", errno)
			return
		}
		if _, _, errno := unix.Syscall(unix.SYS_MADVISE, r[0], r[1]-r[0], unix.MADV_RANDOM); errno != 0 {
			slog.Debug("executable left to read-around", "err", errno)
		}
		released += int(r[1] - r[0])
	}
	slog.Debug("startup pages released", "bytes", released)
}

// readOnlyMappings are the address ranges of /proc/self/maps that map
// path without write access: its code and read-only data.
func readOnlyMappings(maps []byte, path string) [][2]uintptr {
	var out [][2]uintptr
	sc := bufio.NewScanner(bytes.NewReader(maps))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 6 || f[5] != path || strings.Contains(f[1], "w") {
			continue
		}
		lo, hi, ok := strings.Cut(f[0], "-")
		if !ok {
			continue
		}
		start, err1 := strconv.ParseUint(lo, 16, 64)
		end, err2 := strconv.ParseUint(hi, 16, 64)
		if err1 == nil && err2 == nil && end > start {
			out = append(out, [2]uintptr{uintptr(start), uintptr(end)})
		}
	}
	return out
}
