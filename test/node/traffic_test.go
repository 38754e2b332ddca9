package node

import (
	"context"
	"fmt"
	"net"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/capo-net/capo/test/nodebed"
)

// Pod to pod through Calico's dataplane (felix routes the node), with the
// node's chain Calico's own (capo's chart installed, the node not opted in)
// and then with capo-ipam in it: old and new pods reach each other both
// ways, each answer names the pod Calico IPAM allocated the address to.
func TestTrafficPodToPod(t *testing.T) {
	pool, cidr := bed.NewPool(t, 28)
	ns := bed.Namespace(t, "traffic-plain", pool, true)
	if err := bed.CalicoOnly(); err != nil {
		t.Fatalf("the node must start opted out, with Calico's own chain: %v", err)
	}
	bed.EchoStatefulSet(t, ns, "before", 1, nodebed.Echo{})
	before := bed.WaitRunning(t, ns, "app=before", 1)["before-0"]
	c1 := bed.EchoClient(t, ns, "client-before", "")
	reaches(t, ns, c1.Name, before, cidr)

	bed.OptIn(t)
	bed.EchoStatefulSet(t, ns, "after", 1, nodebed.Echo{})
	after := bed.WaitRunning(t, ns, "app=after", 1)["after-0"]
	c2 := bed.EchoClient(t, ns, "client-after", "")
	for _, c := range []string{c1.Name, c2.Name} {
		for _, srv := range []*corev1.Pod{before, after} {
			reaches(t, ns, c, srv, cidr)
		}
	}
}

// reaches dials srv's address from client and checks srv answered, and
// that Calico IPAM has that address allocated to srv's sandbox.
func reaches(t *testing.T, ns, client string, srv *corev1.Pod, cidr *net.IPNet) {
	t.Helper()
	ctx := context.Background()
	var got nodebed.Answer
	nodebed.Eventually(t, 30*time.Second, client+" reaches "+srv.Name, func() error {
		var err error
		got, err = bed.Dial(ctx, ns, client, nodebed.EchoAddr(srv))
		return err
	})
	if got.Pod != srv.Name || got.UID != string(srv.UID) {
		t.Fatalf("%s dialled %s (%s) and %s (uid %s) answered", client, nodebed.EchoAddr(srv), srv.Name, got.Pod, got.UID)
	}
	if err := bed.AllocatedTo(ctx, cidr, srv.Status.PodIP, srv); err != nil {
		t.Fatal(err)
	}
}

// A StatefulSet member on the first node taken away three ways comes back
// with its address, and a client on the second node probing that address
// all along reaches it again across the nodes: the answer names the member
// (and its new incarnation), and no other pod answered on the address at
// any time; a client on the member's own node reaches it too. Each return is also read in Calico's
// datastore: the address held while the member was away (or already
// returned), then allocated to the new sandbox and no longer reserved.
func TestTrafficFollowsTheReturnedAddress(t *testing.T) {
	ctx := context.Background()
	if err := bed.EnsurePriorityClasses(ctx); err != nil {
		t.Fatal(err)
	}
	n2 := bed.StartNode2(t)
	pool, cidr := bed.NewPool(t, 28)
	ns := bed.Namespace(t, "traffic-return", pool, true)
	bed.OptIn(t)
	// On the first node: the kubelet whose memory pressure the bed drives.
	bed.EchoStatefulSet(t, ns, "db", 2, nodebed.Echo{AllocMiB: victimMiB, AllocOn: "db-1", Node: bed.NodeName})
	pods := bed.WaitRunning(t, ns, "app=db", 2)
	h := bed.WatchPods(t, ns)
	idle := bed.EchoClient(t, ns, "dialer", "")

	for i, tc := range []struct {
		name, member string
		sameUID      bool
		away         func(t *testing.T, p *corev1.Pod)
	}{
		{"kubectl delete pod", "db-0", false, func(t *testing.T, p *corev1.Pod) {
			if _, err := bed.Kubectl(ctx, "-n", ns, "delete", "pod", p.Name, "--timeout=90s"); err != nil {
				t.Fatal(err)
			}
		}},
		{"sandbox re-created", "db-0", true, func(t *testing.T, p *corev1.Pod) {
			killSandbox(t, p)
		}},
		{"evicted by the kubelet", "db-1", false, func(t *testing.T, p *corev1.Pod) {
			bed.PressureEvict(t, h, p, victimMiB<<20)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			old := pods[tc.member]
			if now := bed.Pod(ns, tc.member); now != nil && now.Status.PodIP != "" {
				old = now
			}
			probe := bed.EchoClientOn(t, ns, fmt.Sprintf("probe-%d", i), n2.Name, nodebed.EchoAddr(old))
			answered(t, ns, probe.Name, old, time.Time{})
			returns := agentMetric(t, returnsMetric, returnedOutcome)
			start := time.Now()
			tc.away(t, old)
			heldOrReturned(t, cidr, old, returns)
			now := back(t, ns, old, tc.sameUID)
			// The reservation ends after the new sandbox has the address.
			nodebed.Eventually(t, 30*time.Second, "the address allocated to the new sandbox and no longer reserved", func() error {
				return bed.AllocatedTo(ctx, cidr, now.Status.PodIP, now)
			})
			answered(t, ns, probe.Name, now, start)
			reaches(t, ns, idle.Name, now, cidr)
			onlyMember(t, ns, probe.Name, old.Name)
			pods[tc.member] = now
		})
	}
}

// back waits for old's member to run again, under a new UID or (a sandbox
// re-created) the same one on a new sandbox, and checks it has old's address.
func back(t *testing.T, ns string, old *corev1.Pod, sameUID bool) *corev1.Pod {
	t.Helper()
	now := successor(t, ns, old, sameUID)
	if now.Status.PodIP != old.Status.PodIP {
		t.Fatalf("%s came back with %s, not its own address %s", old.Name, now.Status.PodIP, old.Status.PodIP)
	}
	return now
}

// successor waits for old's member to run again, as back does, whatever
// its address.
func successor(t *testing.T, ns string, old *corev1.Pod, sameUID bool) *corev1.Pod {
	t.Helper()
	var now *corev1.Pod
	oldSandbox := old.Annotations["cni.projectcalico.org/containerID"]
	nodebed.Eventually(t, 3*time.Minute, old.Name+" back", func() error {
		now = bed.Pod(ns, old.Name)
		switch {
		case now == nil || now.Status.Phase != corev1.PodRunning || now.Status.PodIP == "" || now.DeletionTimestamp != nil:
			return fmt.Errorf("%s not running", old.Name)
		case sameUID && now.UID != old.UID:
			return fmt.Errorf("%s is another pod (uid %s): its sandbox must be re-created under it", old.Name, now.UID)
		case sameUID && now.Annotations["cni.projectcalico.org/containerID"] == oldSandbox:
			return fmt.Errorf("%s still on sandbox %.12s", old.Name, oldSandbox)
		case !sameUID && now.UID == old.UID:
			return fmt.Errorf("no new %s yet", old.Name)
		}
		return nil
	})
	return now
}

// answered waits until the probing client has an answer from pod (name
// and UID) at or after since.
func answered(t *testing.T, ns, client string, pod *corev1.Pod, since time.Time) {
	t.Helper()
	nodebed.Eventually(t, 60*time.Second, client+" answered by "+pod.Name, func() error {
		p, err := bed.ProbeLog(context.Background(), ns, client)
		if err != nil {
			return err
		}
		for _, a := range p.Answers {
			if a.Pod == pod.Name && a.UID == string(pod.UID) && !a.At.Before(since) {
				return nil
			}
		}
		return fmt.Errorf("%d answers, %d failures, none from %s uid %s since %s", len(p.Answers), p.Failures, pod.Name, pod.UID, since.Format(time.TimeOnly))
	})
}

// onlyMember checks that every answer the probing client ever got named
// member: no other pod held the address at any moment it was dialled.
func onlyMember(t *testing.T, ns, client, member string) {
	t.Helper()
	p, err := bed.ProbeLog(context.Background(), ns, client)
	if err != nil {
		t.Fatal(err)
	}
	uids := map[string]bool{}
	for _, a := range p.Answers {
		if a.Pod != member {
			t.Fatalf("%s answered on %s's address at %s", a.Pod, member, a.At.Format(time.StampMilli))
		}
		uids[a.UID] = true
	}
	t.Logf("%s: %d answers, all from %s (%d incarnations), %d failed attempts while it was away", client, len(p.Answers), member, len(uids), p.Failures)
}

// killSandbox kills the pod's pause process: the kubelet re-creates its
// sandbox (SandboxChanged), with a CNI DEL and ADD and no API call.
func killSandbox(t *testing.T, p *corev1.Pod) {
	t.Helper()
	pid := pausePid(t, p.Annotations["cni.projectcalico.org/containerID"])
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill -9 %d (the pause process of %s): %v", pid, p.Name, err)
	}
}
