package nativev3

import (
	"context"
	"errors"
	"net"
	"testing"

	cerrors "github.com/projectcalico/calico/libcalico-go/lib/errors"
	"github.com/projectcalico/calico/libcalico-go/lib/ipam"
	cnet "github.com/projectcalico/calico/libcalico-go/lib/net"
	"k8s.io/client-go/kubernetes"

	"github.com/capo-net/capo/pkg/calico/client"
	"github.com/capo-net/capo/test/testbed"
)

// An address a v3-mode calico-ipam allocated is read by capo's v3 reader
// as libcalico-go reads one in crd.projectcalico.org/v1: the pod's handle
// and attributes, the handle's address, the pool's block counted; once the
// pod's DEL released it, it is free.
func TestV3ReaderReadsCalicoIPAM(t *testing.T) {
	testbed.SkipWithoutCalicoFromEnv(t)
	ctx := context.Background()
	env := bed.NewEnv(t, testbed.Kubernetes, testbed.EnvOptions{NoAgent: true, CalicoRelease: testbed.CalicoFromEnv})
	cs, err := kubernetes.NewForConfig(bed.REST)
	if err != nil {
		t.Fatal(err)
	}
	r := client.NewIPAM(cs.CoreV1().RESTClient())
	sb := env.AddPods("web", 1, env.Conflist(testbed.PlainCalico))[0]
	ip := cnet.IP{IP: net.ParseIP(sb.IP())}

	attrs, handle, err := r.GetAssignmentAttributes(ctx, ip)
	if err != nil {
		t.Fatalf("reading who holds %s: %v", ip, err)
	}
	if handle == nil || *handle != sb.Handle() {
		t.Fatalf("%s held by handle %v, want %s", ip, handle, sb.Handle())
	}
	if attrs[ipam.AttributeNamespace] != sb.Pod.Namespace || attrs[ipam.AttributePod] != sb.Pod.Name || attrs[ipam.AttributeNode] != env.Node {
		t.Fatalf("%s's attributes %v, want pod %s/%s on %s", ip, attrs, sb.Pod.Namespace, sb.Pod.Name, env.Node)
	}
	ips, err := r.IPsByHandle(ctx, sb.Handle())
	if err != nil || len(ips) != 1 || ips[0].String() != sb.IP() {
		t.Fatalf("handle %s's addresses: %v %v", sb.Handle(), ips, err)
	}
	use, err := r.GetUtilization(ctx, ipam.GetUtilizationArgs{Pools: []string{env.Pool.String()}})
	if err != nil || len(use) != 1 || len(use[0].Blocks) != 1 || use[0].Blocks[0].Capacity-use[0].Blocks[0].Available != 1 {
		t.Fatalf("utilization of pool %s: %+v %v", env.Pool, use, err)
	}

	if err := sb.Del(ctx); err != nil {
		t.Fatal(err)
	}
	if _, _, err := r.GetAssignmentAttributes(ctx, ip); !errors.As(err, new(cerrors.ErrorResourceDoesNotExist)) {
		t.Fatalf("%s after the pod's DEL: %v, want free", ip, err)
	}
}
