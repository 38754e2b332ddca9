package node

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	apiv3 "github.com/projectcalico/api/pkg/apis/projectcalico/v3"
	"github.com/projectcalico/calico/libcalico-go/lib/ipam"
	cnet "github.com/projectcalico/calico/libcalico-go/lib/net"
	corev1 "k8s.io/api/core/v1"

	"github.com/capo-net/capo/test/nodebed"
	"github.com/capo-net/capo/test/testbed"
)

// returnAddress anyNode with Calico's IPAMConfiguration strictAffinity on:
// calico-ipam assigns no node an address of another node's block, so a
// member moved from the first node to the second cannot take its address
// along. capo declines before asking (an Event AddressNotReturned naming
// strictAffinity); the member gets a fresh address from the second node's
// own block and clients on both nodes reach it there; its old address
// stays held for it, allocated to no one, and no other pod answers on it.
func TestStrictAffinityGivesAFreshAddressAcross(t *testing.T) {
	ctx := context.Background()
	a := memberOnTheFirstNode(t, "strict")
	n2, ns, cidr, old, probe, dialer := a.n2, a.ns, a.cidr, a.old, a.probe, a.dialer
	inBlockOf(t, dialer.Status.PodIP, n2.Name) // the second node has a block of its own

	bed.StrictAffinity(t, true)
	refused := n2Metric(t, n2, returnsMetric, `outcome="refused"`, `reason="strict-affinity"`)
	cordon(t, bed.NodeName)
	if _, err := bed.Kubectl(ctx, "-n", ns, "delete", "pod", old.Name, "--timeout=90s"); err != nil {
		t.Fatal(err)
	}
	now := successor(t, ns, old, false)
	if now.Spec.NodeName != n2.Name {
		t.Fatalf("db-0 came back on %s, want %s", now.Spec.NodeName, n2.Name)
	}
	if now.Status.PodIP == old.Status.PodIP {
		t.Fatalf("db-0 got its address %s back on %s with strictAffinity on", old.Status.PodIP, n2.Name)
	}
	inBlockOf(t, now.Status.PodIP, n2.Name)
	notReturned(t, now, "strictAffinity")
	if got := n2Metric(t, n2, returnsMetric, `outcome="refused"`, `reason="strict-affinity"`); got <= refused {
		t.Fatalf("%s's agent counted %v refusals for strict-affinity, want more than %v", n2.Name, got, refused)
	}
	reaches(t, ns, probe.Name, now, cidr)
	reaches(t, ns, dialer.Name, now, cidr)
	if err := bed.Held(ctx, cidr, old.Status.PodIP, old); err != nil {
		t.Fatal(err)
	}
	onlyPod(t, ns, probe.Name, old)
	calicoRefuses(t, old.Status.PodIP, n2.Name)
}

// calicoRefuses checks that Calico's IPAM itself, asked as calico-ipam
// asks for a requested address, will not assign ip on node: capo's decline
// spares the pod only an ADD that would fail.
func calicoRefuses(t *testing.T, ip, node string) {
	t.Helper()
	ctx := context.Background()
	handle := "capo-test-strict"
	err := bed.Calico.IPAM().AssignIP(ctx, ipam.AssignIPArgs{
		IP: cnet.MustParseIP(ip), HandleID: &handle, Hostname: node,
		IntendedUse: apiv3.IPPoolAllowedUseWorkload,
	})
	if err == nil {
		if _, _, rerr := bed.Calico.IPAM().ReleaseIPs(ctx, ipam.ReleaseOptions{Address: ip, Handle: handle}); rerr != nil {
			t.Errorf("releasing %s again: %v", ip, rerr)
		}
		t.Fatalf("Calico assigned %s, of another node's block, on %s with strictAffinity on", ip, node)
	}
	if !strings.Contains(err.Error(), "affinity") {
		t.Fatalf("Calico refused %s on %s, but not for the block's affinity: %v", ip, node, err)
	}
	t.Logf("Calico refuses %s on %s: %v", ip, node, err)
}

// inBlockOf checks that ip is in an allocation block affine to node.
func inBlockOf(t *testing.T, ip, node string) {
	t.Helper()
	host, err := bed.BlockHost(context.Background(), ip)
	if err != nil {
		t.Fatal(err)
	}
	if host != node {
		t.Fatalf("%s is in a block of node %q, want %s's", ip, host, node)
	}
}

// notReturned waits for capo's Event AddressNotReturned on pod, its
// message naming why.
func notReturned(t *testing.T, pod *corev1.Pod, why string) {
	t.Helper()
	nodebed.Eventually(t, 30*time.Second, "an AddressNotReturned Event on "+pod.Name, func() error {
		evs := bed.PodEvents(pod.Namespace, string(pod.UID))
		for _, e := range evs {
			if strings.HasPrefix(e, "AddressNotReturned: ") && strings.Contains(e, why) {
				return nil
			}
		}
		return fmt.Errorf("no AddressNotReturned naming %q among %q", why, evs)
	})
}

// onlyPod checks that every answer the probing client ever got came from
// pod itself: no other pod, the member's successor included, answered on
// its address.
func onlyPod(t *testing.T, ns, client string, pod *corev1.Pod) {
	t.Helper()
	p, err := bed.ProbeLog(context.Background(), ns, client)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range p.Answers {
		if a.Pod != pod.Name || a.UID != string(pod.UID) {
			t.Fatalf("%s (uid %s) answered on %s's address %s at %s", a.Pod, a.UID, pod.Name, pod.Status.PodIP, a.At.Format(time.StampMilli))
		}
	}
	t.Logf("%s: %d answers, all from %s before it went, %d failed attempts", client, len(p.Answers), pod.Name, p.Failures)
}

// n2Metric sums a metric of the second node's agent over the series
// matching labels.
func n2Metric(t *testing.T, n2 *nodebed.Node2, name string, labels ...string) float64 {
	t.Helper()
	text, err := n2.AgentMetrics()
	if err != nil {
		t.Fatal(err)
	}
	return testbed.SumMetric(text, name, labels...)
}
