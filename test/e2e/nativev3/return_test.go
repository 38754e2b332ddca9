package nativev3

import (
	"context"
	"errors"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	cerrors "github.com/projectcalico/calico/libcalico-go/lib/errors"
	"github.com/projectcalico/calico/libcalico-go/lib/ipam"
	cnet "github.com/projectcalico/calico/libcalico-go/lib/net"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/capo-net/capo/pkg/calico/client"
	"github.com/capo-net/capo/test/testbed"
)

// v3IPAM is capo's reader of Calico's v3 IPAM on the bed.
func v3IPAM(t *testing.T) *client.IPAM {
	t.Helper()
	cs, err := kubernetes.NewForConfig(bed.REST)
	if err != nil {
		t.Fatal(err)
	}
	return client.NewIPAM(cs.CoreV1().RESTClient())
}

// allocated reports whether Calico's v3 IPAM holds ip for some handle.
func allocated(t *testing.T, ip string) bool {
	t.Helper()
	_, _, err := v3IPAM(t).GetAssignmentAttributes(context.Background(), cnet.IP{IP: net.ParseIP(ip)})
	if errors.As(err, new(cerrors.ErrorResourceDoesNotExist)) {
		return false
	}
	if err != nil {
		t.Fatalf("reading who holds %s: %v", ip, err)
	}
	return true
}

func held(env *testbed.Env, ip string) bool {
	_, ok := env.Reservations()[ip]
	return ok
}

// event waits for an Event of reason on pod whose message says says.
func event(t *testing.T, env *testbed.Env, pod, reason, says string) {
	t.Helper()
	eventually(t, 10*time.Second, "Event "+reason+" on "+pod, func() bool {
		evs, err := env.Kube.CoreV1().Events(env.Namespace).List(context.Background(), metav1.ListOptions{FieldSelector: "reason=" + reason + ",involvedObject.name=" + pod})
		return err == nil && slices.ContainsFunc(evs.Items, func(e corev1.Event) bool { return strings.Contains(e.Message, says) })
	})
}

// A member's return in native v3 mode, as TestReturningPodGetsItsAddressBack
// proves it in crd.projectcalico.org/v1: the evicted member's address is
// reserved in projectcalico.org/v3 and nobody else gets it; its successor
// (same name, new UID) gets it back from the v3-mode calico-ipam, and the
// return is confirmed: the reservation ends, an AddressReturned Event and
// the agent's returned count say so.
func TestV3MemberReturnsToItsAddress(t *testing.T) {
	testbed.SkipWithoutCalicoFromEnv(t)
	ctx := context.Background()
	env := bed.NewEnv(t, testbed.Kubernetes, testbed.EnvOptions{PoolPrefix: 29, OptIn: true, CalicoRelease: testbed.CalicoFromEnv})
	env.Agent.WaitMetric(1, "capo_calico_api_info", `group="projectcalico.org/v3"`)
	conflist := env.Conflist(testbed.Capo)
	redis := testbed.StatefulPod("redis")
	pods := env.AddPods("redis", 7, conflist, redis) // 7 of the /29's 8
	old := pods[3]
	env.Evict(old.Pod.Name)
	if err := old.Del(ctx); err != nil {
		t.Fatalf("DEL of the evicted member's sandbox: %v", err)
	}
	if r, ok := env.Reservations()[old.IP()]; !ok || r.Pod != old.Pod.Name {
		t.Fatalf("%s not reserved in v3 for %s: %v", old.IP(), old.Pod.Name, env.Reservations())
	}
	if allocated(t, old.IP()) {
		t.Fatalf("%s still allocated after the reserved DEL: calico-ipam should have released it", old.IP())
	}

	// The pool's only free address goes to another pod; the next gets none.
	web := testbed.WithLabels(map[string]string{"app": "web"})
	intruder := env.AddPods("web", 1, conflist, web)[0]
	if intruder.IP() == old.IP() {
		t.Fatalf("another pod got %s, reserved for %s", old.IP(), old.Pod.Name)
	}
	if err := env.NewSandbox(env.CreatePod("web-1", web), conflist).Add(ctx); err == nil {
		t.Fatal("a pod got an address from a pool whose only free one is reserved")
	}

	// The successor: the pod object replaced under its name (a new UID).
	env.DeletePod(old.Pod.Name, 0)
	back := env.NewSandbox(env.CreatePod(old.Pod.Name, redis), conflist)
	if err := back.Add(ctx); err != nil {
		t.Fatalf("ADD of the returning %s (a return must never fail an ADD): %v", old.Pod.Name, err)
	}
	if back.IP() != old.IP() {
		t.Fatalf("%s came back with %s, want its own %s", old.Pod.Name, back.IP(), old.IP())
	}
	if h, _, err := v3IPAM(t).GetAssignmentAttributes(ctx, cnet.IP{IP: net.ParseIP(old.IP())}); err != nil || h[ipam.AttributePod] != old.Pod.Name {
		t.Fatalf("%s in Calico's v3 IPAM after the return: %v %v, want the returned pod's", old.IP(), h, err)
	}
	eventually(t, 10*time.Second, "the reservation of the returned address ends", func() bool { return !held(env, old.IP()) })
	event(t, env, old.Pod.Name, "AddressReturned", old.IP())
	env.Agent.WaitMetric(1, "capo_agent_address_returns_total", `outcome="returned"`)
}
