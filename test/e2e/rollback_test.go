package e2e

import (
	"context"
	"net"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/capo-net/capo/test/testbed"
)

// Calico's own ADD can fail after IPAM has assigned the addresses (the
// network set-up, an annotation it refuses, the endpoint write); it then
// rolls back by calling IPAM DEL, which capo-ipam passes straight to
// calico-ipam. When that ADD was a return, the address is free again in
// Calico's IPAM: its reservation must still hold it, until a later sandbox
// of the pod really has it. Both datastores, two real triggers; each
// checks Calico's datastore: no selected address free and unreserved, no
// DEL failed, and the pod gets its address on the runtime's next try.
func TestRollbackAfterReturnKeepsTheReservation(t *testing.T) {
	triggers := []struct {
		name  string
		opts  []testbed.PodOption        // of the returning pod
		setup func(*testbed.Sandbox)     // on its failing sandbox
		fix   func(*testbed.Env, string) // before the runtime's next try
	}{
		{
			// The calico plugin refuses floating IPs while the feature is off,
			// after DoNetworking and IPAM.
			name: "annotation refused after IPAM",
			opts: []testbed.PodOption{testbed.WithAnnotations(map[string]string{"cni.projectcalico.org/floatingIPs": `["192.0.2.7"]`})},
			fix:  dropFloatingIPs,
		},
		{
			// The sandbox's network namespace is gone before the runtime's ADD
			// reaches the network set-up (the sandbox died under it).
			name:  "sandbox netns gone",
			setup: func(sb *testbed.Sandbox) { sb.RemoveNetNS() },
		},
	}
	eachDatastore(t, func(t *testing.T, ds testbed.Datastore) {
		env := bed.NewEnv(t, ds, testbed.EnvOptions{PoolPrefix: 28, OptIn: true})
		conflist := env.Conflist(testbed.Capo)
		for i, tr := range triggers {
			t.Run(tr.name, func(t *testing.T) {
				set := "redis" + string(rune('a'+i))
				member := testbed.StatefulPod(set)
				old := env.AddPods(set, 2, conflist, member)[1]
				env.Evict(old.Pod.Name)
				if err := old.Del(context.Background()); err != nil {
					t.Fatalf("DEL of the evicted member: %v", err)
				}
				env.DeletePod(old.Pod.Name, 0)
				pod := env.CreatePod(old.Pod.Name, append([]testbed.PodOption{member}, tr.opts...)...)
				failing := env.NewSandbox(pod, conflist)
				if tr.setup != nil {
					tr.setup(failing)
				}
				if err := failing.Add(context.Background()); err == nil {
					t.Fatal("the trigger did not make Calico's ADD fail")
				}
				// The failed ADD was a return: the member was offered its address.
				env.Agent.WaitMetric(float64(2*i+1), "capo_agent_address_returns_total", `outcome="offered"`)
				// The runtime tears the failed sandbox down; the DEL must pass.
				if err := failing.Del(context.Background()); err != nil {
					t.Fatalf("DEL of the failed sandbox: %v", err)
				}
				heldThroughout(t, env, old.IPs, 5*time.Second)
				intruder := env.AddPods("web"+set, 1, conflist, testbed.WithLabels(map[string]string{"app": "web"}))[0]
				if !disjoint(intruder.IPs, old.IPs) {
					t.Fatalf("another pod got %v, the rolled-back member's", intruder.IPs)
				}
				if tr.fix != nil {
					tr.fix(env, pod.Name)
				}
				retry := env.NewSandbox(pod, conflist)
				if err := retry.Add(context.Background()); err != nil {
					t.Fatalf("the runtime's next try: %v", err)
				}
				if !same(retry.IPs, old.IPs) {
					t.Fatalf("the member got %v on the next try, want its own %v", retry.IPs, old.IPs)
				}
				eventually(t, 15*time.Second, "the reservation ends once the member has its address", func() bool {
					_, held := env.Reservations()[old.IP()]
					return !held
				})
				env.Agent.WaitMetric(float64(i+1), "capo_agent_address_returns_total", `outcome="rolled-back"`)
			})
		}
	})
}

// heldThroughout checks, for a while, that no address of ips is ever free
// in Calico's IPAM without a reservation.
func heldThroughout(t *testing.T, env *testbed.Env, ips []net.IP, d time.Duration) {
	t.Helper()
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		rs := env.Reservations()
		for _, ip := range ips {
			if _, held := rs[ip.String()]; !held && !env.Allocated(ip) {
				t.Fatalf("%s is free in Calico's IPAM and reserved by nobody: the next pod can take it", ip)
			}
		}
	}
}

func dropFloatingIPs(env *testbed.Env, pod string) {
	env.T.Helper()
	patch := []byte(`{"metadata":{"annotations":{"cni.projectcalico.org/floatingIPs":null}}}`)
	if _, err := env.Kube.CoreV1().Pods(env.Namespace).Patch(context.Background(), pod, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		env.T.Fatal(err)
	}
}
