package node

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/capo-net/capo/pkg/reserve"
	"github.com/capo-net/capo/test/nodebed"
)

const clientLabel = "client on the 2nd node"

// demoRedis is the demo's two-node part: redis-0 (an echo server standing
// in for redis) runs on the first node, a client on the second dials its
// address all along; the kubelet evicts redis-0, the StatefulSet brings it
// back with its address, and the client reaches it there again. It
// returns the address and how long the client went without an answer.
func demoRedis(t *testing.T) (string, time.Duration) {
	// The demo's TTL of 8s would release the address while redis-0 is away.
	setConfig(t, "ipReserveTime: 8s", "ipReserveTime: 40m", "ipReleasePeriod: 1s", "ipReleasePeriod: 5s")
	say("\n4. A second node joins: its own kubelet, containerd and felix, Calico routing pods between the two nodes.")
	say("   The chart's DaemonSet runs capo's agent there too, and the operator opts it in; capo's TTL is back at 40m.")
	n2 := bed.StartNode2(t)
	n2.WaitAgent(t)
	n2.OptIn(t)
	pool, cidr := bed.NewPool(t, 25) // two blocks of 64: one per node
	s := redisScene{ns: bed.Namespace(t, "redis", pool, true), cidr: cidr}
	s.h = bed.WatchPods(t, s.ns)
	bed.EchoStatefulSet(t, s.ns, "redis", 1, nodebed.Echo{AllocMiB: victimMiB, AllocOn: "redis-0", Node: bed.NodeName})
	s.member = bed.WaitRunning(t, s.ns, "app=redis", 1)["redis-0"]
	s.client = bed.EchoClientOn(t, s.ns, "redis-client", n2.Name, nodebed.EchoAddr(s.member))
	answered(t, s.ns, s.client.Name, s.member, time.Time{})
	say("   A StatefulSet redis with one member, redis-0, on %s at %s (a stand-in for redis that answers", bed.NodeName, s.member.Status.PodIP)
	say("   each connection with its pod's name and UID), and a client on %s dialling it every 100 ms.", n2.Name)
	say("   %-22s %s answered by redis-0 (uid %.8s)", clientLabel, nodebed.EchoAddr(s.member), s.member.UID)
	return redisReturns(t, s)
}

// redisScene is the two-node part's namespace, pool and pods.
type redisScene struct {
	ns             string
	cidr           *net.IPNet
	h              *nodebed.History
	member, client *corev1.Pod
}

// redisReturns is step 5: the member evicted, held, back with its address
// and reached there again by the same client.
func redisReturns(t *testing.T, s redisScene) (string, time.Duration) {
	ctx, old := context.Background(), s.member
	say("\n5. The kubelet evicts redis-0 under memory pressure. The StatefulSet controller deletes the evicted pod and")
	say("   creates redis-0 again; capo gives the new redis-0 its old address back. The client keeps dialling.")
	w := watchAddress(t, s.ns, s.cidr, old)
	returns := agentMetric(t, returnsMetric, returnedOutcome)
	start := time.Now()
	last := bed.PressureEvict(t, s.h, old, victimMiB<<20)
	say("   %-22s redis-0 (%s) evicted: %s", capoLabel, old.Status.PodIP, evictedAs(last))
	now := back(t, s.ns, old, false)
	if now.Spec.NodeName != bed.NodeName {
		t.Fatalf("redis-0 came back on %s, want %s", now.Spec.NodeName, bed.NodeName)
	}
	nodebed.Eventually(t, 30*time.Second, "the address allocated to the new redis-0 and no longer reserved", func() error {
		return bed.AllocatedTo(ctx, s.cidr, now.Status.PodIP, now)
	})
	answered(t, s.ns, s.client.Name, now, start)
	tellHeld(t, w.stop(t), old.Status.PodIP, returns)
	say("   %-22s redis-0 back on %s with %s (uid %.8s), allocated to its new sandbox, no longer reserved", capoLabel, now.Spec.NodeName, now.Status.PodIP, now.UID)
	n, gap := silence(t, s.ns, s.client.Name, old, now)
	say("   %-22s %s answered by the new redis-0 after %.1fs without an answer;", clientLabel, nodebed.EchoAddr(now), gap.Seconds())
	say("   %-22s all %d answers it got, before and after, came from redis-0", "", n)
	return now.Status.PodIP, gap
}

// tellHeld says what the reads saw while the member was away. None found
// the address reserved only if capo returned it between two reads; the
// agent counts a return only of an address it found reserved.
func tellHeld(t *testing.T, w *addressWatch, ip string, returnsBefore float64) {
	t.Helper()
	if w.reads > 0 {
		r := w.entry
		say("   %-22s %s reserved: pod %s/%s, reason %s", capoLabel, ip, r.Namespace, r.Pod, r.Reason)
		say("   %-22s Calico IPAM read %d times: held in %d reads over %.1fs, never another pod's", "", w.polls, w.reads, w.last.Sub(w.first).Seconds())
		return
	}
	if agentMetric(t, returnsMetric, returnedOutcome) <= returnsBefore {
		t.Fatalf("%s was never seen reserved in %d reads, and the agent counted no return of a reserved address", ip, w.polls)
	}
	say("   %-22s %s reserved and returned between two reads", capoLabel, ip)
	say("   %-22s Calico IPAM read %d times: never another pod's", "", w.polls)
}

// evictedAs says how an eviction ended: Failed/Evicted, or (a container
// that exits 0 on SIGTERM) Succeeded with the kubelet's DisruptionTarget.
func evictedAs(p *corev1.Pod) string {
	if p.Status.Reason != "" {
		return string(p.Status.Phase) + "/" + p.Status.Reason
	}
	return string(p.Status.Phase) + ", condition DisruptionTarget (TerminationByKubelet)"
}

// silence checks that every answer in the client's log came from old or
// now, and returns how many there were and how long the client went
// without one between old's last answer and now's first.
func silence(t *testing.T, ns, client string, old, now *corev1.Pod) (int, time.Duration) {
	t.Helper()
	p, err := bed.ProbeLog(context.Background(), ns, client)
	if err != nil {
		t.Fatal(err)
	}
	var lastOld, firstNew time.Time
	for _, a := range p.Answers {
		switch {
		case a.Pod == old.Name && a.UID == string(old.UID):
			lastOld = a.At
		case a.Pod == now.Name && a.UID == string(now.UID):
			if firstNew.IsZero() {
				firstNew = a.At
			}
		default:
			t.Fatalf("%s (uid %s) answered on %s's address at %s", a.Pod, a.UID, old.Name, a.At.Format(time.StampMilli))
		}
	}
	if lastOld.IsZero() || firstNew.IsZero() || firstNew.Before(lastOld) {
		t.Fatalf("%s's log: last answer from the old %s at %s, first from the new at %s", client, old.Name, lastOld, firstNew)
	}
	return len(p.Answers), firstNew.Sub(lastOld)
}

// addressWatch reads Calico's IPAM and the IPReservations every 200 ms
// while a member is away: its address must stay its own (allocated to a
// pod of its name) or reserved, and the reads that find it reserved
// are noted.
type addressWatch struct {
	done, finished chan struct{}
	once           sync.Once

	mu           sync.Mutex
	polls, reads int
	first, last  time.Time
	entry        reserve.Entry
	violations   []string
}

func watchAddress(t *testing.T, ns string, cidr *net.IPNet, member *corev1.Pod) *addressWatch {
	w := &addressWatch{done: make(chan struct{}), finished: make(chan struct{})}
	ip := member.Status.PodIP
	go func() {
		defer close(w.finished)
		ctx := context.Background()
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			v := checkHeld(ctx, ns, cidr, map[string]*corev1.Pod{member.Name: member})
			allocs, aerr := bed.Allocations(ctx, cidr)
			entries, rerr := bed.Reservations(ctx)
			w.mu.Lock()
			w.polls++
			if v != "" {
				w.violations = append(w.violations, time.Now().Format(time.StampMilli)+": "+v)
			}
			if _, allocated := allocs[ip]; aerr == nil && rerr == nil && !allocated {
				if e, ok := entries[ip]; ok {
					if w.reads == 0 {
						w.first, w.entry = time.Now(), e
					}
					w.reads++
					w.last = time.Now()
				}
			}
			w.mu.Unlock()
			select {
			case <-w.done:
				return
			case <-tick.C:
			}
		}
	}()
	t.Cleanup(w.end)
	return w
}

func (w *addressWatch) end() {
	w.once.Do(func() { close(w.done) })
	<-w.finished
}

// stop ends the reads and fails the test if any found the address
// unprotected.
func (w *addressWatch) stop(t *testing.T) *addressWatch {
	t.Helper()
	w.end()
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.violations) > 0 {
		t.Fatalf("over %d reads, %d found the address unprotected: %v", w.polls, len(w.violations), w.violations)
	}
	return w
}
