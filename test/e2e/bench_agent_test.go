package e2e

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/capo-net/capo/test/testbed"
)

// agentScalePoints are issue 14's cluster sizes (namespaces, pods) and pods
// on the agent's node.
var (
	agentClusterSizes = []struct{ namespaces, pods int }{{100, 1000}, {1000, 10000}, {5000, 50000}}
	agentNodePods     = []int{10, 110, 250}
)

// BenchmarkAgentAtScale reports capo-agent's resident memory against the
// pods on its node and the namespaces and pods in the cluster: idle after
// start, and during and after a storm of up to 100 DELs of selected pods
// whose objects are force-deleted as their sandboxes go (the agent then
// decides on the pods it remembers). The cluster is API objects only
// (pods bound to nodes by spec.nodeName); it grows from point to point and
// is removed at the end. It measures once per point, whatever b.N:
//
//	go test -run '^$' -bench AgentAtScale -benchtime 1x -timeout 60m ./test/e2e/
func BenchmarkAgentAtScale(b *testing.B) {
	ctx := context.Background()
	cluster, err := bed.NewCluster(bed.Unique("scale"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if err := cluster.Remove(ctx); err != nil {
			b.Errorf("removing the scale objects: %v", err)
		}
	})
	for _, size := range agentClusterSizes {
		for _, onNode := range agentNodePods {
			b.Run(fmt.Sprintf("ns=%d/pods=%d/node-pods=%d", size.namespaces, size.pods, onNode), func(b *testing.B) {
				// Grown here, not before: a -bench filter seeds only the sizes it runs.
				if cluster.Pods() < size.pods {
					start := time.Now()
					if err := cluster.Grow(ctx, size.namespaces, size.pods, max(size.pods/50, 1)); err != nil {
						b.Fatal(err)
					}
					b.Logf("cluster of %d namespaces and %d pods seeded in %s", cluster.Namespaces(), cluster.Pods(), time.Since(start).Round(time.Second))
				}
				agentAtScale(b, cluster, onNode)
			})
		}
	}
}

// agentIdle is how long the agent runs idle before it is measured: long
// enough for the runtime to hand the start's list buffers back.
const agentIdle = 20 * time.Second

func agentAtScale(b *testing.B, cluster *testbed.Cluster, onNode int) {
	ctx := context.Background()
	env := bed.NewEnv(b, testbed.Kubernetes, testbed.EnvOptions{PoolPrefix: 24, NoAgent: true, OptIn: true})
	pods, err := env.CreateScalePods(cluster, "db", onNode)
	if err != nil {
		b.Fatal(err)
	}
	// The bed has just built the agent: write its pages back first, so that,
	// as with an image's, the kernel can drop those the agent hands back
	// (it keeps a dirty page cached, and then maps it again on a fault
	// nearby).
	syscall.Sync()
	a := env.StartAgent()
	stormed := pods[:min(100, onNode)]
	sandboxes := make([]*testbed.Sandbox, len(stormed))
	netconf := env.IPAMNetConf(testbed.Capo)
	for i, p := range stormed {
		sandboxes[i] = env.NewSandbox(p, nil)
		if _, err := env.ExecIPAM(ctx, "capo-ipam", "ADD", netconf, sandboxes[i]); err != nil {
			b.Fatal(err)
		}
	}
	time.Sleep(agentIdle)
	reportMiB(b, a.RSSBytes(), "idle-rss-MiB")
	reportMiB(b, int64(a.Metric("go_memstats_heap_inuse_bytes")), "idle-heap-MiB")
	reportMiB(b, a.PeakRSSBytes(), "start-peak-rss-MiB")
	reportMiB(b, a.AnonRSSBytes(), "idle-anon-rss-MiB")

	stormPeak := sampleMax(a.RSSBytes, func() { delStorm(b, env, netconf, sandboxes) })
	reportMiB(b, stormPeak, "storm-rss-MiB")
	a.WaitMetric(float64(len(stormed)), "capo_agent_del_decisions_total", `outcome="reserved"`)
	time.Sleep(agentIdle)
	reportMiB(b, a.RSSBytes(), "after-storm-rss-MiB")
	reportMiB(b, a.AnonRSSBytes(), "after-storm-anon-rss-MiB")
	reportMiB(b, a.PeakRSSBytes(), "peak-rss-MiB")
}

// delStorm tears down every sandbox, 20 at a time, as a drain does: the pod
// object force-deleted, then its DEL through capo-ipam.
func delStorm(b *testing.B, env *testbed.Env, netconf []byte, sbs []*testbed.Sandbox) {
	zero := int64(0)
	var wg sync.WaitGroup
	var failed atomic.Pointer[error]
	sem := make(chan struct{}, 20)
	for _, sb := range sbs {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			ctx := context.Background()
			err := env.Kube.CoreV1().Pods(sb.Pod.Namespace).Delete(ctx, sb.Pod.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
			if err == nil {
				_, err = env.ExecIPAM(ctx, "capo-ipam", "DEL", netconf, sb)
			}
			if err != nil {
				failed.Store(&err)
			}
		}()
	}
	wg.Wait()
	if err := failed.Load(); err != nil {
		b.Fatal(*err)
	}
}

// sampleMax runs f and returns the largest value of measure seen meanwhile.
func sampleMax(measure func() int64, f func()) int64 {
	done := make(chan struct{})
	peak := make(chan int64)
	go func() {
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		var m int64
		for {
			m = max(m, measure())
			select {
			case <-done:
				peak <- max(m, measure())
				return
			case <-t.C:
			}
		}
	}()
	f()
	close(done)
	return <-peak
}

func reportMiB(b *testing.B, bytes int64, unit string) {
	b.ReportMetric(float64(bytes)/(1<<20), unit)
}
