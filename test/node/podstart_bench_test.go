package node

import (
	"context"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/capo-net/capo/test/nodebed"
)

// BenchmarkPodStart is pod start on the two-node bed, capo against plain
// Calico in the same run: CAPO_BENCH_PODS pods (default 100), half
// on a node opted in to capo (capo-ipam in its chain, every pod selected:
// StatefulSet pods in a selected namespace), half on a node left to
// Calico's own chain, all created at once. Each pod's time to Running is
// read by one watch, from the pod's first appearance to its first status
// with phase Running, so the two sides share every clock. The nodes swap
// roles for a second round, so neither node's own speed favours a side.
// Reported per side: median and p90 of time to Running, pods Running per
// second (the side's pods over the time from its first pod's appearance to
// its last one's Running), and capo's median over Calico's. Not a timed
// test: nothing is asserted about the figures. make bench-node runs it.
func BenchmarkPodStart(b *testing.B) {
	pods := 100
	if v := os.Getenv("CAPO_BENCH_PODS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 2 {
			b.Fatalf("CAPO_BENCH_PODS=%q: want a number of pods, at least 2", v)
		}
		pods = n
	}
	n2 := bed.StartNode2(b)
	n2.WaitAgent(b)

	var capo, plain side
	rounds := 0
	for i := 0; i < b.N; i++ {
		for _, capoFirst := range []bool{true, false} {
			capoNode, plainNode := bed.NodeName, n2.Name
			if capoFirst {
				bed.OptIn(b)
				n2.OptOut(b)
			} else {
				bed.OptOut(b)
				nodebed.Eventually(b, 30*time.Second, "Calico's own chain back on "+bed.NodeName, bed.CalicoOnly)
				n2.OptIn(b)
				capoNode, plainNode = n2.Name, bed.NodeName
			}
			rounds++
			c, p := startRound(b, rounds, pods, capoNode, plainNode)
			b.Logf("round %d: %d pods on %s (capo): %s; %d on %s (Calico): %s", rounds, pods-pods/2, capoNode, c, pods/2, plainNode, p)
			capo.add(c)
			plain.add(p)
		}
	}
	ratio := capo.median() / plain.median()
	b.Logf("all rounds: capo %s; Calico %s; capo's median / Calico's: %.2f", &capo, &plain, ratio)
	b.ReportMetric(capo.median()*1000, "capo-median-ms")
	b.ReportMetric(capo.p90()*1000, "capo-p90-ms")
	b.ReportMetric(plain.median()*1000, "calico-median-ms")
	b.ReportMetric(plain.p90()*1000, "calico-p90-ms")
	b.ReportMetric(ratio, "median-ratio")
	b.ReportMetric(capo.rate(), "capo-pods/s")
	b.ReportMetric(plain.rate(), "calico-pods/s")
}

// side is one side's pods: each one's time to Running, and each round's
// span from the first pod's appearance to the last one's Running.
type side struct {
	toRunning []float64 // seconds
	pods      int
	span      float64 // seconds, summed over rounds
}

func (s *side) add(o *side) {
	s.toRunning = append(s.toRunning, o.toRunning...)
	s.pods += o.pods
	s.span += o.span
}

// quantile is the nearest-rank quantile q of the times to Running.
func (s *side) quantile(q float64) float64 {
	if len(s.toRunning) == 0 {
		return math.NaN()
	}
	v := slices.Clone(s.toRunning)
	slices.Sort(v)
	return v[max(0, int(math.Ceil(q*float64(len(v))))-1)]
}

func (s *side) median() float64 { return s.quantile(0.5) }
func (s *side) p90() float64    { return s.quantile(0.9) }
func (s *side) rate() float64   { return float64(s.pods) / s.span }

func (s *side) String() string {
	return fmt.Sprintf("median %.0f ms, p90 %.0f ms, max %.0f ms, %.1f pods Running/s", s.median()*1000, s.p90()*1000, s.quantile(1)*1000, s.rate())
}

// startRound creates pods pods at once, half (rounded up) on capoNode and
// half on plainNode, each side a StatefulSet of its own with parallel pod
// management in one selected namespace, and times them by one watch. It
// deletes them afterwards and waits until they are gone, so rounds do not
// overlap.
func startRound(b *testing.B, round, pods int, capoNode, plainNode string) (capo, plain *side) {
	b.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pool, _ := bed.NewPool(b, 24) // a fresh pool a round: 256 addresses, four blocks of 64
	ns := bed.Namespace(b, fmt.Sprintf("bench-%d", round), pool, true)
	w, err := bed.Kube.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { w.Stop() }()
	rv, rewatches := "", 0

	sets := map[string]string{"capo": capoNode, "calico": plainNode}
	replicas := map[string]int32{"capo": int32(pods - pods/2), "calico": int32(pods / 2)}
	for name, node := range sets {
		spec := nodebed.Workload{}.PodSpec()
		spec.NodeSelector = map[string]string{"kubernetes.io/hostname": node}
		labels := map[string]string{"app": name}
		r := replicas[name]
		set := &appsv1.StatefulSet{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: appsv1.StatefulSetSpec{
				Replicas: &r, Selector: &metav1.LabelSelector{MatchLabels: labels},
				PodManagementPolicy: appsv1.ParallelPodManagement,
				Template:            corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: spec},
			},
		}
		if _, err := bed.Kube.AppsV1().StatefulSets(ns).Create(ctx, set, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
	}

	type times struct {
		set           string
		node          string
		seen, running time.Time
	}
	got := map[types.UID]*times{}
	done := 0
	deadline := time.After(10 * time.Minute)
	for done < pods {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok || ev.Type == watch.Error {
				// The API server ends a watch now and then: watch on from
				// the last event seen.
				if rewatches++; rewatches > 100 {
					b.Fatalf("round %d: the pod watch keeps ending (%v), with %d of %d pods Running", round, ev.Object, done, pods)
				}
				w.Stop()
				if w, err = bed.Kube.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: rv}); err != nil {
					b.Fatal(err)
				}
				continue
			}
			p, isPod := ev.Object.(*corev1.Pod)
			if !isPod || ev.Type == watch.Deleted {
				continue
			}
			rv = p.ResourceVersion
			at := time.Now()
			tm := got[p.UID]
			if tm == nil {
				tm = &times{set: p.Labels["app"], seen: at}
				got[p.UID] = tm
			}
			tm.node = p.Spec.NodeName
			if tm.running.IsZero() && p.Status.Phase == corev1.PodRunning {
				tm.running = at
				done++
			}
		case <-deadline:
			b.Fatalf("round %d: %d of %d pods Running after 10 minutes", round, done, pods)
		}
	}

	if rewatches > 0 {
		b.Logf("round %d: the pod watch was started again %d times", round, rewatches)
	}
	capo, plain = &side{}, &side{}
	first := map[string]time.Time{}
	last := map[string]time.Time{}
	for _, tm := range got {
		if tm.node != sets[tm.set] {
			b.Fatalf("a pod of %s ran on %s, want %s", tm.set, tm.node, sets[tm.set])
		}
		s := map[string]*side{"capo": capo, "calico": plain}[tm.set]
		s.toRunning = append(s.toRunning, tm.running.Sub(tm.seen).Seconds())
		s.pods++
		if f, ok := first[tm.set]; !ok || tm.seen.Before(f) {
			first[tm.set] = tm.seen
		}
		if tm.running.After(last[tm.set]) {
			last[tm.set] = tm.running
		}
	}
	capo.span = last["capo"].Sub(first["capo"]).Seconds()
	plain.span = last["calico"].Sub(first["calico"]).Seconds()

	for name := range sets {
		if err := bed.Kube.AppsV1().StatefulSets(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	nodebed.Eventually(b, 5*time.Minute, fmt.Sprintf("round %d's pods gone", round), func() error {
		list, err := bed.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err == nil && len(list.Items) > 0 {
			err = fmt.Errorf("%d pods left", len(list.Items))
		}
		return err
	})
	return capo, plain
}
