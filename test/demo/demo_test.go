// Package demo tells capo's story on the real chain: `make demo`.
package demo

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/capo-net/capo/pkg/reserve"
	"github.com/capo-net/capo/test/testbed"
)

var bed *testbed.Bed

func TestMain(m *testing.M) { os.Exit(testbed.Main(m, &bed)) }

func say(format string, a ...any) { fmt.Printf(format+"\n", a...) }

// node is one side of the comparison: a /28 pool (16 addresses) filled to
// the last address, so any freed address is the next pod's.
type node struct {
	label  string
	env    *testbed.Env
	list   []byte
	redis3 *testbed.Sandbox
	redis5 *testbed.Sandbox
	set    []testbed.PodOption // how a redis pod is created
}

func TestDemo(t *testing.T) {
	ctx := context.Background()
	say("\ncapo demo: real etcd, kube-apiserver, calico, calico-ipam, capo-ipam, capo-agent and capo-controller on this machine.")
	say("Two nodes, each with a 16-address Calico pool, full: 8 redis StatefulSet pods and 8 web pods.")
	capoEnv := bed.NewEnv(t, testbed.Kubernetes, testbed.EnvOptions{PoolPrefix: 28, OptIn: true})
	// A demo-sized TTL; Capo's default is 40m.
	capoEnv.SetConfig("apiVersion: config.capo.io/v1\nkind: CapoConfig\nipReserveTime: 8s\nipReleasePeriod: 1s\n")
	plainEnv := bed.NewEnv(t, testbed.Kubernetes, testbed.EnvOptions{PoolPrefix: 28, NoAgent: true})
	nodes := []*node{
		{label: "with capo (opted in)", env: capoEnv, list: capoEnv.Conflist(testbed.Capo)},
		{label: "plain Calico", env: plainEnv, list: plainEnv.Conflist(testbed.PlainCalico)},
	}
	for _, n := range nodes {
		n.set = []testbed.PodOption{testbed.OwnedBy(n.env.CreateStatefulSet("redis", 8))}
		redis := n.env.AddPods("redis", 8, n.list, n.set...)
		n.env.AddPods("web", 8, n.list, testbed.WithLabels(map[string]string{"app": "web"}))
		n.redis3, n.redis5 = redis[3], redis[5]
		say("  %-22s %s  pool %s  redis-3 has %s, redis-5 %s", n.label, n.env.Node, n.env.Pool, n.redis3.IP(), n.redis5.IP())
	}

	say("\n1. The kubelet evicts redis-3 and redis-5 under memory pressure: the pod objects stay (Failed/Evicted), no API")
	say("   delete happens, and the runtime tears the sandboxes down with a CNI DEL. An admission webhook never sees this.")
	for _, n := range nodes {
		for _, sb := range []*testbed.Sandbox{n.redis3, n.redis5} {
			n.env.Evict(sb.Pod.Name)
			if err := sb.Del(ctx); err != nil {
				t.Fatalf("%s: DEL: %v", n.label, err)
			}
		}
	}
	held := capoEnv.Reservations()
	r3, ok3 := held[nodes[0].redis3.IP()]
	r, ok := held[nodes[0].redis5.IP()]
	if !ok || !ok3 {
		t.Fatalf("capo did not reserve %s and %s: %v", nodes[0].redis3.IP(), nodes[0].redis5.IP(), held)
	}
	for _, e := range []reserve.Entry{r3, r} {
		say("   %-22s %s reserved: pod %s/%s, owner %s/%s, reason %s, at %s", nodes[0].label, e.IP, e.Namespace, e.Pod, e.OwnerKind, e.OwnerName, e.Reason, e.ReservedAt.Format("15:04:05"))
	}
	say("   %-22s %s and %s released and free", nodes[1].label, nodes[1].redis3.IP(), nodes[1].redis5.IP())

	say("\n2. A new web pod starts on each node; the only free addresses are redis-3's and redis-5's old ones.")
	var verdict []string
	for _, n := range nodes {
		sb := n.env.NewSandbox(n.env.CreatePod("web-new", testbed.WithLabels(map[string]string{"app": "web"})), n.list)
		err := sb.Add(ctx)
		switch {
		case err != nil && n.env == capoEnv:
			say("   %-22s web-new waits: %s and %s are held for redis-3 and redis-5 (%s)", n.label, n.redis3.IP(), n.redis5.IP(), short(err))
			verdict = append(verdict, "capo kept "+n.redis3.IP()+" and "+n.redis5.IP()+" out of reuse")
		case err == nil && (sb.IP() == n.redis3.IP() || sb.IP() == n.redis5.IP()):
			say("   %-22s web-new got %s: redis clients of the evicted pod now reconnect to a web pod", n.label, sb.IP())
			verdict = append(verdict, "plain Calico handed "+sb.IP()+" to the next pod at once")
		default:
			t.Fatalf("%s: unexpected: ip %q err %v", n.label, sb.IP(), err)
		}
	}

	say("\n3. The StatefulSet brings redis-3 back (a new pod object under the same name, on the same node).")
	for _, n := range nodes {
		n.env.DeletePod("redis-3", 0)
		back := n.env.NewSandbox(n.env.CreatePod("redis-3", n.set...), n.list)
		err := back.Add(ctx)
		switch {
		case n.env == capoEnv && err == nil && back.IP() == n.redis3.IP():
			testbed.Eventually(t, 10*time.Second, "redis-3's reservation ends", func() bool { _, held := capoEnv.Reservations()[n.redis3.IP()]; return !held })
			say("   %-22s redis-3 got its own %s back: its peers find it where they left it; the reservation ended (returned)", n.label, back.IP())
		case n.env == plainEnv && err == nil:
			say("   %-22s redis-3 got %s, whatever was free: its peers must be told the new address", n.label, back.IP())
			verdict = append(verdict, "plain Calico gave the returning redis-3 "+back.IP())
		default:
			t.Fatalf("%s: redis-3 came back with ip %q err %v", n.label, back.IP(), err)
		}
	}

	say("\n4. capo-controller releases the reservation when its TTL (here 8s) has passed; the address is")
	say("   allocatable again.")
	c := capoEnv.StartController("demo")
	testbed.Eventually(t, 30*time.Second, "the controller releases the reservation", func() bool {
		_, held := capoEnv.Reservations()[r.IP]
		return !held
	})
	say("   %-22s %s released after %s held (capo_controller_releases_total{reason=\"ttl\"} = %v)", nodes[0].label, r.IP,
		time.Since(r.ReservedAt).Round(time.Second), c.Metric("capo_controller_releases_total", `reason="ttl"`))
	later := capoEnv.NewSandbox(capoEnv.CreatePod("web-later", testbed.WithLabels(map[string]string{"app": "web"})), nodes[0].list)
	if err := later.Add(ctx); err != nil || later.IP() != r.IP {
		t.Fatalf("after release: ip %q err %v", later.IP(), err)
	}
	say("   %-22s web-later got %s", nodes[0].label, later.IP())
	say("\nverdict: %s after a kubelet eviction and gave redis-3 its own address back; %s; %s. PASS", verdict[0], verdict[1], verdict[2])
}

func short(err error) string {
	if strings.Contains(err.Error(), "No IPs available") || strings.Contains(err.Error(), "free") {
		return "calico-ipam: no free address in the pool"
	}
	return err.Error()
}
