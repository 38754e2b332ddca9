package nodebed

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// HighPriority is a priority class for pods a test wants ranked after its
// victim under node pressure.
const HighPriority = "realnode-high"

// EnsurePriorityClasses creates the bed's priority classes.
func (b *Bed) EnsurePriorityClasses(ctx context.Context) error {
	pc := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: HighPriority}, Value: 1000}
	if _, err := b.Kube.SchedulingV1().PriorityClasses().Create(ctx, pc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return nil
}

// Evicted reports whether the kubelet has finished evicting p: Failed with
// reason Evicted, or Succeeded with the DisruptionTarget condition the
// kubelet sets (a container that exits 0 on SIGTERM leaves no reason).
func Evicted(p *corev1.Pod) bool {
	switch p.Status.Phase {
	case corev1.PodFailed:
		return p.Status.Reason == "Evicted"
	case corev1.PodSucceeded:
		return DisruptedByKubelet(p)
	}
	return false
}

// DisruptedByKubelet reports the DisruptionTarget condition the kubelet
// sets when it evicts.
func DisruptedByKubelet(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.DisruptionTarget && c.Status == corev1.ConditionTrue && c.Reason == "TerminationByKubelet" {
			return true
		}
	}
	return false
}

// PressureEvict has the kubelet evict victim, which holds held bytes of
// memory above its request, the way it does under node memory pressure:
// the kubelet restarted with a memory.available threshold (the operator's
// --eviction-hard) that only this pod's memory crosses, then, once the
// victim is evicted, restarted without it. It returns the victim's last
// state. On a shared machine other processes may lift the pressure before
// the kubelet acts; the threshold is then taken again, up to three times.
func (b *Bed) PressureEvict(t testing.TB, h *History, victim *corev1.Pod, held int64) *corev1.Pod {
	t.Helper()
	Eventually(t, 60*time.Second, "the victim's memory resident", func() error {
		used, err := PodMemory(victim)
		if err == nil && used < held*9/10 {
			err = fmt.Errorf("pod %s uses %d MiB of the %d it holds", victim.Name, used>>20, held>>20)
		}
		return err
	})
	defer func() {
		if err := b.RestartKubelet(NoPressure); err != nil {
			t.Fatalf("restarting the kubelet without pressure: %v", err)
		}
	}()
	var last error
	for range 3 {
		threshold, err := PressureThreshold(held)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("kubelet restarted with --eviction-hard=memory.available<%s", threshold)
		if err := b.RestartKubelet(threshold); err != nil {
			t.Fatal(err)
		}
		last = Poll(context.Background(), 90*time.Second, func() error {
			if p := h.Last(victim.UID); p != nil && Evicted(p) {
				return nil
			}
			return fmt.Errorf("%s not evicted", victim.Name)
		})
		if last == nil {
			return h.Last(victim.UID)
		}
	}
	t.Fatalf("the kubelet did not evict %s under memory pressure: %v (kubelet log: %s)", victim.Name, last, b.logPath("kubelet"))
	return nil
}

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
