package nodebed

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// MemAvailable is memory.available as the kubelet computes it on cgroup
// v1: the machine's memory less the root cgroup's working set (its usage
// less inactive file pages).
func MemAvailable() (int64, error) {
	total, err := meminfo("MemTotal:")
	if err != nil {
		return 0, err
	}
	usage, err := readInt("/sys/fs/cgroup/memory/memory.usage_in_bytes")
	if err != nil {
		return 0, err
	}
	inactive, err := memStat("/sys/fs/cgroup/memory/memory.stat", "total_inactive_file")
	if err != nil {
		return 0, err
	}
	return total - (usage - inactive), nil
}

// PodMemory is the memory a Burstable pod's cgroup uses.
func PodMemory(p *corev1.Pod) (int64, error) {
	return readInt(filepath.Join("/sys/fs/cgroup/memory", CgroupRoot, "kubepods", "burstable", "pod"+string(p.UID), "memory.usage_in_bytes"))
}

// PressureThreshold is a memory.available threshold that puts the node
// under pressure now, while a pod holds held bytes, and lifts it once that
// pod is gone: halfway between today's available memory and what it will
// be. Other processes on a shared machine may move memory by up to half
// of held either way without evicting a second pod or missing the first.
func PressureThreshold(held int64) (string, error) {
	avail, err := MemAvailable()
	if err != nil {
		return "", err
	}
	return strconv.FormatInt((avail+held/2)>>20, 10) + "Mi", nil
}

func meminfo(key string) (int64, error) {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), key); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no %s in /proc/meminfo", key)
}

func memStat(path, key string) (int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, key+" "); ok {
			return strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		}
	}
	return 0, fmt.Errorf("no %s in %s", key, path)
}

func readInt(path string) (int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
}
