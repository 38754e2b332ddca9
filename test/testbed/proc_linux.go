package testbed

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// rss reads a process's resident set size from /proc.
func rss(pid int) int64 { return statusBytes(pid, "VmRSS:") }

// peakRSS reads a process's resident high-water mark from /proc.
func peakRSS(pid int) int64 { return statusBytes(pid, "VmHWM:") }

func statusBytes(pid int, key string) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return -1
	}
	if kb := statusKiB(string(b), key); kb >= 0 {
		return kb << 10
	}
	return -1
}

// statusKiB reads one "Key:   123 kB" line of /proc/<pid>/status; -1 if absent.
func statusKiB(status, key string) int64 {
	for _, line := range strings.Split(status, "\n") {
		if v, ok := strings.CutPrefix(line, key); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				return -1
			}
			return kb
		}
	}
	return -1
}
