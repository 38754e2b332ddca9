package nativev3

import (
	"context"
	"net/netip"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/capo-net/capo/pkg/wire"
	"github.com/capo-net/capo/test/testbed"
)

// A handle is compared as Calico compares it. Calico drops everything from
// a "\r" on (sanitizeHandle: host-local's migration to Calico IPAM once
// wrote such handles, and Calico still reads and releases them as the
// handle before it); capo's projectcalico.org/v3 reader compared the
// handle whole, so a member's allocation read as no one's and its
// teardown was answered "nothing to reserve". The allocation is written
// here as calico-ipam's migration left it, and the teardown asked of the
// agent as capo-ipam asks it without an ADD record.
func TestV3HandleIsComparedAsCalicoDoes(t *testing.T) {
	ctx := context.Background()
	env := bed.NewEnv(t, testbed.Kubernetes, testbed.EnvOptions{OptIn: true})
	pod := env.CreatePod("db-0", testbed.OwnedBy(env.CreateStatefulSet("db", 1)))
	cid := testbed.NewContainerID()
	handle := testbed.NetworkName + "." + cid
	block := netip.PrefixFrom(netip.MustParseAddr(env.Pool.IP.String()), 26)
	addr := block.Addr().Next().Next().Next().Next().Next() // ordinal 5
	dyn, err := dynamic.NewForConfig(bed.REST)
	if err != nil {
		t.Fatal(err)
	}
	create(t, dyn, "ipamblocks", migratedBlock(block, 5, handle+"\r\neth0", env.Namespace, pod.Name, env.Node))
	create(t, dyn, "ipamhandles", map[string]any{
		"metadata": map[string]any{"name": strings.ToLower(handle)},
		"spec":     map[string]any{"handleID": handle, "block": map[string]any{block.String(): int64(1)}},
	})

	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := wire.NewClient(env.AgentSocket()).Reserve(rctx, &wire.ReserveRequest{
		ContainerID: cid, IfName: "eth0", Network: testbed.NetworkName,
		Pod: wire.PodRef{Namespace: pod.Namespace, Name: pod.Name, UID: string(pod.UID)},
	})
	if err != nil || resp.Outcome != wire.Reserved || len(resp.IPs) != 1 || resp.IPs[0] != addr.String() {
		t.Fatalf("the teardown of %s's sandbox: %+v %v; want %s reserved", pod.Name, resp, err, addr)
	}
	if !held(env, addr.String()) {
		t.Fatalf("%s not reserved", addr)
	}
}

// migratedBlock is a projectcalico.org/v3 IPAMBlock of cidr with one
// allocation, at ordinal, to handle.
func migratedBlock(cidr netip.Prefix, ordinal int, handle, ns, pod, node string) map[string]any {
	n := 1 << (32 - cidr.Bits())
	allocations, unallocated := make([]any, n), []any{}
	for o := range n {
		if o == ordinal {
			allocations[o] = int64(0)
		} else {
			unallocated = append(unallocated, int64(o))
		}
	}
	name := strings.NewReplacer(".", "-", "/", "-").Replace(cidr.String())
	return map[string]any{
		"metadata": map[string]any{"name": name},
		"spec": map[string]any{
			"cidr": cidr.String(), "affinity": "host:" + node, "strictAffinity": false,
			"allocations": allocations, "unallocated": unallocated,
			"attributes": []any{map[string]any{"handle_id": handle, "secondary": map[string]any{"namespace": ns, "pod": pod, "node": node}}},
		},
	}
}

// create makes a projectcalico.org/v3 object of resource, removed when the
// test ends.
func create(t *testing.T, dyn dynamic.Interface, resource string, obj map[string]any) {
	t.Helper()
	r := dyn.Resource(schema.GroupVersionResource{Group: "projectcalico.org", Version: "v3", Resource: resource})
	u := &unstructured.Unstructured{Object: obj}
	u.SetAPIVersion("projectcalico.org/v3")
	u.SetKind(map[string]string{"ipamblocks": "IPAMBlock", "ipamhandles": "IPAMHandle"}[resource])
	if _, err := r.Create(context.Background(), u, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating %s %s: %v", resource, u.GetName(), err)
	}
	t.Cleanup(func() { _ = r.Delete(context.Background(), u.GetName(), metav1.DeleteOptions{}) })
}
