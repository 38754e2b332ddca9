package e2e

import (
	"context"
	"testing"
	"time"

	apiv3 "github.com/projectcalico/api/pkg/apis/projectcalico/v3"
	libapiv3 "github.com/projectcalico/calico/libcalico-go/lib/apis/v3"
	bapi "github.com/projectcalico/calico/libcalico-go/lib/backend/api"
	"github.com/projectcalico/calico/libcalico-go/lib/backend/model"
	"github.com/projectcalico/calico/libcalico-go/lib/options"
	corev1 "k8s.io/api/core/v1"

	"github.com/capo-net/capo/pkg/reserve"
	"github.com/capo-net/capo/test/testbed"
)

// On etcdv3 a Calico node is an object of its own beside the Kubernetes
// Node: calico-node registers it, and it can be missing while the Node
// stands (deleted by hand, not registered again yet). With returnAddress
// anyNode, the agent read a missing Calico node as a node gone, and freed
// a returning member's predecessor there (calico-ipam's DEL of its
// sandbox) though Kubernetes still counts on that node, where the old
// sandbox may run with the address: one address, two pods. A missing
// Calico node now reads through to the Kubernetes Node of its name: it
// stands, so nothing is freed and the member gets a fresh address.
func TestReclaimAsksTheNodeOfAMissingCalicoNode(t *testing.T) {
	ctx := context.Background()
	a := bed.NewEnv(t, testbed.Etcd, testbed.EnvOptions{OptIn: true})
	b := bed.NewEnv(t, testbed.Etcd, testbed.EnvOptions{OptIn: true})
	pool, err := a.Calico.IPPools().Get(ctx, a.PoolName(), options.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pool.Spec.NodeSelector, pool.Spec.VXLANMode = "all()", apiv3.VXLANModeAlways
	if _, err := a.Calico.IPPools().Update(ctx, pool, options.SetOptions{}); err != nil {
		t.Fatal(err)
	}
	old := a.NewSandbox(a.CreatePod("mq-0", testbed.StatefulPod("mq")), a.Conflist(testbed.Capo))
	if err := old.Add(ctx); err != nil {
		t.Fatal(err)
	}
	// a's pod deleted from under it while its sandbox stays up, its address
	// reserved as capo-controller's node-lost coverage does.
	e := reserve.Entry{
		IP: old.IP(), Node: a.Node, Namespace: a.Namespace, Pod: "mq-0", PodUID: string(old.Pod.UID),
		Reason: reserve.ReasonNodeLost, ReservedAt: time.Now().UTC(), OwnerKind: "StatefulSet", OwnerName: "mq",
	}
	if _, err := a.ReservationStore().Reserve(ctx, a.Node, []reserve.Entry{e}); err != nil {
		t.Fatal(err)
	}
	// Calico's node for a goes, its Kubernetes Node stands: the key alone,
	// as libcalico-go's Delete would also release the node's addresses.
	be, ok := a.Calico.(interface{ Backend() bapi.Client })
	if !ok {
		t.Fatalf("%T gives no backend", a.Calico)
	}
	if _, err := be.Backend().Delete(ctx, model.ResourceKey{Kind: libapiv3.KindNode, Name: a.Node}, ""); err != nil {
		t.Fatal(err)
	}
	b.SetConfig(configWith("returnAddress: anyNode\n"))
	b.Agent.WaitMetric(1, "capo_agent_config_reloads_total", `result="success"`)
	a.DeletePod("mq-0", 0)
	back := b.NewSandbox(a.CreatePod("mq-0", testbed.StatefulPod("mq"), func(p *corev1.Pod) { p.Spec.NodeName = b.Node }), b.Conflist(testbed.Capo))
	if err := back.Add(ctx); err != nil {
		t.Fatal(err)
	}
	if same(back.IPs, old.IPs) {
		t.Fatalf("%s freed from %s's sandbox on %s, whose Kubernetes Node stands, and given to its successor", old.IP(), old.Pod.Name, a.Node)
	}
	if h, err := a.Calico.IPAM().IPsByHandle(ctx, old.Handle()); err != nil || len(h) != 1 {
		t.Fatalf("the predecessor's allocation: %v %v", h, err)
	}
}
