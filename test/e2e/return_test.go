package e2e

import (
	"context"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	apiv3 "github.com/projectcalico/api/pkg/apis/projectcalico/v3"
	"github.com/projectcalico/calico/libcalico-go/lib/ipam"
	cnet "github.com/projectcalico/calico/libcalico-go/lib/net"
	"github.com/projectcalico/calico/libcalico-go/lib/options"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/capo-net/capo/pkg/reserve"
	"github.com/capo-net/capo/pkg/reserve/calicostore"
	"github.com/capo-net/capo/pkg/returns"
	"github.com/capo-net/capo/test/testbed"
)

// returnBed is one dual-stack env where pods are torn down and come back:
// every case asserts both families, which come back together or not at all.
type returnBed struct {
	t        *testing.T
	env      *testbed.Env
	conflist []byte
}

func (b *returnBed) add(name string, opts ...testbed.PodOption) *testbed.Sandbox {
	b.t.Helper()
	sb := b.env.NewSandbox(b.env.CreatePod(name, opts...), b.conflist)
	if err := sb.Add(context.Background()); err != nil {
		b.t.Fatalf("ADD of %s: %v", name, err)
	}
	return sb
}

// teardown evicts the pod (phase Failed, sandbox DEL'd) and checks that
// both its addresses are reserved.
func (b *returnBed) teardown(sb *testbed.Sandbox) {
	b.t.Helper()
	b.env.Evict(sb.Pod.Name)
	if err := sb.Del(context.Background()); err != nil {
		b.t.Fatalf("DEL of %s: %v", sb.Pod.Name, err)
	}
	b.held(sb.IPs, true)
}

// comeBack replaces the pod object under its name, as a StatefulSet does
// (a new pod UID), and ADDs its new sandbox.
func (b *returnBed) comeBack(name string, opts ...testbed.PodOption) *testbed.Sandbox {
	b.t.Helper()
	b.env.DeletePod(name, 0)
	sb := b.env.NewSandbox(b.env.CreatePod(name, opts...), b.conflist)
	if err := sb.Add(context.Background()); err != nil {
		b.t.Fatalf("ADD of the returning %s (this feature must never fail an ADD): %v", name, err)
	}
	return sb
}

// held checks that ips are all reserved (want) or, eventually, none is.
func (b *returnBed) held(ips []net.IP, want bool) {
	b.t.Helper()
	count := func() int {
		rs, n := b.env.Reservations(), 0
		for _, ip := range ips {
			if _, ok := rs[ip.String()]; ok {
				n++
			}
		}
		return n
	}
	if want {
		if n := count(); n != len(ips) {
			b.t.Fatalf("%d of %v reserved; reservations %v", n, ips, b.env.Reservations())
		}
		return
	}
	eventually(b.t, 10*time.Second, "the reservations of the returned addresses end", func() bool { return count() == 0 })
}

func (b *returnBed) event(pod, reason, says string) {
	b.t.Helper()
	eventually(b.t, 10*time.Second, "Event "+reason+" on "+pod, func() bool {
		evs, err := b.env.Kube.CoreV1().Events(b.env.Namespace).List(context.Background(), metav1.ListOptions{FieldSelector: "reason=" + reason + ",involvedObject.name=" + pod})
		return err == nil && slices.ContainsFunc(evs.Items, func(e corev1.Event) bool { return strings.Contains(e.Message, says) })
	})
}

func same(a, b []net.IP) bool {
	return slices.EqualFunc(a, b, func(x, y net.IP) bool { return x.Equal(y) })
}

func disjoint(a, b []net.IP) bool {
	return !slices.ContainsFunc(a, func(x net.IP) bool { return slices.ContainsFunc(b, x.Equal) })
}

// A StatefulSet pod that comes back gets the addresses capo held for it,
// through the real calico plugin and calico-ipam, on both datastores;
// where it must not, it gets fresh ones and the reservations stay.
func TestReturningPodGetsItsAddressBack(t *testing.T) {
	eachDatastore(t, func(t *testing.T, ds testbed.Datastore) {
		env := bed.NewEnv(t, ds, testbed.EnvOptions{PoolPrefix: 29, OptIn: true, DualStack: true})
		b := &returnBed{t: t, env: env, conflist: env.Conflist(testbed.Capo)}
		redis := testbed.StatefulPod("redis")

		t.Run("same set, same node", func(t *testing.T) {
			b.t = t
			pods := env.AddPods("redis", 7, b.conflist, redis) // 7 of the /29's 8
			old := pods[3]
			b.teardown(old)
			// The pool's only free IPv4 address goes to one pod; the next
			// finds none: the reserved one is nobody else's.
			web := testbed.WithLabels(map[string]string{"app": "web"})
			intruder := env.AddPods("web", 1, b.conflist, web)[0]
			if !disjoint(intruder.IPs, old.IPs) {
				t.Fatalf("another pod got %v, reserved for redis-3", intruder.IPs)
			}
			if err := env.NewSandbox(env.CreatePod("web-1", web), b.conflist).Add(context.Background()); err == nil {
				t.Fatal("a pod got an address from a pool whose only free one is reserved")
			}
			back := b.comeBack("redis-3", redis)
			if !same(back.IPs, old.IPs) {
				t.Fatalf("redis-3 came back with %v, want its own %v", back.IPs, old.IPs)
			}
			if err := back.VerifyDataplane(); err != nil {
				t.Fatal(err)
			}
			b.held(old.IPs, false)
			b.event("redis-3", "AddressReturned", old.IPs[0].String())
			env.Agent.WaitMetric(1, "capo_agent_address_returns_total", `outcome="returned"`)
			if err := intruder.Del(context.Background()); err != nil { // not selected: released, room for the next cases
				t.Fatal(err)
			}
			env.AddPool("more-"+env.ID, 64, 27)
		})

		t.Run("sandbox re-created under a running pod", func(t *testing.T) {
			b.t = t
			old := b.add("es-0", testbed.StatefulPod("es"))
			if err := old.Del(context.Background()); err != nil {
				t.Fatal(err)
			}
			b.held(old.IPs, true)
			fresh := env.NewSandbox(old.Pod, b.conflist)
			if err := fresh.Add(context.Background()); err != nil {
				t.Fatal(err)
			}
			if !same(fresh.IPs, old.IPs) {
				t.Fatalf("the new sandbox got %v, want the pod's own %v", fresh.IPs, old.IPs)
			}
			b.held(old.IPs, false)
		})

		t.Run("IPv4 address held by another: neither family comes back", func(t *testing.T) {
			b.t = t
			old := b.add("kafka-0", testbed.StatefulPod("kafka"))
			b.teardown(old)
			handle := "by-hand-" + env.ID
			if err := env.Calico.IPAM().AssignIP(context.Background(), ipam.AssignIPArgs{IP: cnet.IP{IP: old.IPs[0]}, HandleID: &handle, Hostname: env.Node}); err != nil {
				t.Fatal(err)
			}
			back := b.comeBack("kafka-0", testbed.StatefulPod("kafka"))
			if !disjoint(back.IPs, old.IPs) || len(back.IPs) != 2 {
				t.Fatalf("kafka-0 got %v; %v was held by another and both families must be fresh", back.IPs, old.IPs)
			}
			b.held(old.IPs, true)
			b.event("kafka-0", "AddressNotReturned", "is allocated")
			env.Agent.WaitMetric(1, "capo_agent_address_returns_total", `outcome="refused"`, `reason="allocated"`)
		})

		fresh := []struct {
			name string
			opts []testbed.PodOption // of the pod as it comes back
		}{
			{"opted out", []testbed.PodOption{testbed.StatefulPod("zk"), testbed.WithAnnotations(map[string]string{returns.PodAnnotation: returns.Disabled})}},
			{"StatefulSet re-created with a new UID", []testbed.PodOption{testbed.StatefulPod("zk"), func(p *corev1.Pod) { p.OwnerReferences[0].UID = "uid-new-set" }}},
		}
		for i, tc := range fresh {
			t.Run(tc.name, func(t *testing.T) {
				b.t = t
				name := "zk-" + string(rune('0'+i))
				old := b.add(name, testbed.StatefulPod("zk"))
				b.teardown(old)
				back := b.comeBack(name, tc.opts...)
				if !disjoint(back.IPs, old.IPs) {
					t.Fatalf("%s got %v back", name, old.IPs)
				}
				b.held(old.IPs, true)
			})
		}

		t.Run("returnAddress off", func(t *testing.T) {
			b.t = t
			env.SetConfig(configWith("returnAddress: \"off\"\n"))
			env.Agent.WaitMetric(1, "capo_agent_config_reloads_total", `result="success"`)
			old := b.add("off-0", testbed.StatefulPod("off"))
			b.teardown(old)
			if back := b.comeBack("off-0", testbed.StatefulPod("off")); !disjoint(back.IPs, old.IPs) {
				t.Fatalf("off-0 got %v back with returnAddress off", back.IPs)
			}
			b.held(old.IPs, true)
		})
	})
}

// A StatefulSet pod that comes back on another node: with sameNode it gets
// a fresh address; with anyNode it borrows its old one from the first
// node's block (a VXLAN pool, which felix routes by /32), unless
// strictAffinity forbids calico-ipam to assign from another node's block.
func TestReturnOnAnotherNode(t *testing.T) {
	eachDatastore(t, func(t *testing.T, ds testbed.Datastore) {
		ctx := context.Background()
		a := bed.NewEnv(t, ds, testbed.EnvOptions{OptIn: true})
		b := bed.NewEnv(t, ds, testbed.EnvOptions{OptIn: true})
		// a's pool for both nodes, VXLAN: a borrowed address is routed.
		pool, err := a.Calico.IPPools().Get(ctx, "pool-"+a.ID, options.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		pool.Spec.NodeSelector, pool.Spec.VXLANMode = "all()", apiv3.VXLANModeAlways
		if _, err := a.Calico.IPPools().Update(ctx, pool, options.SetOptions{}); err != nil {
			t.Fatal(err)
		}
		ra := &returnBed{t: t, env: a, conflist: a.Conflist(testbed.Capo)}
		onB := func(p *corev1.Pod) { p.Spec.NodeName = b.Node }
		// comeBackOnB re-creates mq-0 in a's namespace, scheduled to b.
		comeBackOnB := func() *testbed.Sandbox {
			t.Helper()
			a.DeletePod("mq-0", 0)
			sb := b.NewSandbox(a.CreatePod("mq-0", testbed.StatefulPod("mq"), onB), b.Conflist(testbed.Capo))
			if err := sb.Add(ctx); err != nil {
				t.Fatalf("ADD of mq-0 on %s: %v", b.Node, err)
			}
			return sb
		}
		old := ra.add("mq-0", testbed.StatefulPod("mq"))
		ra.teardown(old)

		back := comeBackOnB() // sameNode, the default
		if !disjoint(back.IPs, old.IPs) {
			t.Fatalf("sameNode: mq-0 got %v back on another node", back.IPs)
		}
		ra.held(old.IPs, true)
		if err := back.Del(ctx); err != nil { // b reserves this one for mq-0 too
			t.Fatal(err)
		}

		setStrict := func(on bool) {
			t.Helper()
			cfg, err := a.Calico.IPAM().GetIPAMConfig(ctx)
			if err != nil {
				t.Fatal(err)
			}
			cfg.StrictAffinity = on
			if err := a.Calico.IPAM().SetIPAMConfig(ctx, *cfg); err != nil {
				t.Fatal(err)
			}
		}
		b.SetConfig(configWith("returnAddress: anyNode\n"))
		b.Agent.WaitMetric(1, "capo_agent_config_reloads_total", `result="success"`)
		setStrict(true)
		t.Cleanup(func() { setStrict(false) })
		// b's own reservation for mq-0 is the latest: release it, so a's is the one held.
		releaseHeld(t, b, back.IP())
		back = comeBackOnB()
		if !disjoint(back.IPs, old.IPs) {
			t.Fatalf("strictAffinity: mq-0 got %v, borrowed from %s's block", back.IPs, a.Node)
		}
		ra.held(old.IPs, true)
		b.Agent.WaitMetric(1, "capo_agent_address_returns_total", `outcome="refused"`, `reason="strict-affinity"`)
		ra.event("mq-0", "AddressNotReturned", "strictAffinity is on")
		if err := back.Del(ctx); err != nil {
			t.Fatal(err)
		}
		releaseHeld(t, b, back.IP())

		setStrict(false)
		back = comeBackOnB()
		if !same(back.IPs, old.IPs) {
			t.Fatalf("anyNode: mq-0 got %v on %s, want its own %v", back.IPs, b.Node, old.IPs)
		}
		ra.held(old.IPs, false)
	})
}

// releaseHeld ends the reservation of ip by hand, as capoctl release does.
func releaseHeld(t *testing.T, env *testbed.Env, ip string) {
	t.Helper()
	store := calicostore.New(env.Calico, reserve.DefaultLimits)
	if _, err := store.Release(context.Background(), []reserve.Ref{{Node: env.Node, IP: ip}}); err != nil {
		t.Fatal(err)
	}
}
