package migration

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	cerrors "github.com/projectcalico/calico/libcalico-go/lib/errors"
	cnet "github.com/projectcalico/calico/libcalico-go/lib/net"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/capo-net/capo/pkg/calico/apigroup"
	"github.com/capo-net/capo/pkg/calico/client"
	"github.com/capo-net/capo/pkg/reserve"
	"github.com/capo-net/capo/pkg/reserve/calicostore"
	"github.com/capo-net/capo/test/testbed"
)

// Calico migrates its datastore from v1 to v3 while capo holds addresses
// for evicted members, one member is away and will come back, and one DEL
// is in flight when Calico locks v1. capo writes nothing in v1 once it is
// locked (that DEL is journaled, its address kept allocated), Calico's copy
// carries every reservation with its records, and capo, moved to v3 as
// calico-node is, drains the journal into v3: nothing is freed unreserved,
// nothing is forgotten. With CAPO_CALICO_BIN (a calico that runs in v3),
// the member also comes back to its own address in v3, and the journaled
// DEL's allocation is released there.
func TestMigrationToNativeV3CarriesEveryHeldAddress(t *testing.T) {
	ctx := context.Background()
	release, inV3Calico := "", os.Getenv(testbed.EnvCalicoBin) != ""
	if inV3Calico {
		release = testbed.CalicoFromEnv
	}
	env := bed.NewEnv(t, testbed.Kubernetes, testbed.EnvOptions{PoolPrefix: 28, OptIn: true, CalicoRelease: release})
	env.Agent.WaitMetric(1, "capo_calico_api_info", `group="crd.projectcalico.org/v1"`)
	ctl := env.StartController("before")
	conflist := env.Conflist(testbed.Capo)
	redis := testbed.OwnedBy(env.CreateStatefulSet("redis", 6))
	pods := env.AddPods("redis", 6, conflist, redis)
	held, returning, inFlight := pods[1:3], pods[3], pods[4]
	for _, sb := range append(held[:len(held):len(held)], returning) {
		env.Evict(sb.Pod.Name)
		if err := sb.Del(ctx); err != nil {
			t.Fatalf("DEL of %s: %v", sb.Pod.Name, err)
		}
	}
	before := env.Reservations()
	if len(before) != 3 {
		t.Fatalf("reservations before the migration: %v, want the 3 evicted members'", before)
	}

	// Calico locks v1. The agent and the controller stop writing at once.
	kc, crd, byCalico := testbed.CalicoMigrationFromEnv()
	var migration *testbed.CalicoMigration
	if byCalico {
		t.Logf("Calico's own migration controller migrates: %s", kc)
		if err := bed.ServeCalicoV3(ctx); err != nil { // installed before, as the release that migrates ships them
			t.Fatal(err)
		}
		migration = bed.StartCalicoMigration(t, kc, crd)
	} else if err := bed.LockCalico(ctx, apigroup.GroupV1, true); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	testbed.Eventually(t, 30*time.Second, "the agent not ready, naming Calico's lock", func() bool {
		code, body := env.Agent.Readyz()
		return code != 200 && strings.Contains(body, "is locked")
	})
	t.Logf("the agent turned not ready, naming Calico's lock, %v after the migration began (Calico drains 10 s before it copies)", time.Since(start).Round(time.Millisecond))
	testbed.Eventually(t, 10*time.Second, "the controller not ready, naming Calico's lock", func() bool {
		code, body := ctl.Readyz()
		return code != 200 && strings.Contains(body, "is locked")
	})
	// From here on capo writes nothing in v1: what it wrote before, inside
	// Calico's 10 s drain, is in what Calico copies.
	v1Written := v1ReservationVersions(t)

	// A DEL in flight: the calico plugin checked the datastore before the
	// lock and now calls capo-ipam, as it calls its IPAM plugin.
	env.Evict(inFlight.Pod.Name)
	if _, err := env.ExecIPAM(ctx, "capo-ipam", "DEL", env.IPAMNetConf(testbed.Capo), inFlight); err != nil {
		t.Fatalf("capo-ipam failed a DEL while Calico is locked: %v", err)
	}
	inFlight.RemoveNetNS()
	if pending, err := env.Journal().Pending(); err != nil || len(pending) != 1 {
		t.Fatalf("journal while Calico is locked: %v %v, want the in-flight DEL", pending, err)
	}
	if !env.Allocated(net.ParseIP(inFlight.IP())) {
		t.Fatalf("%s was released while Calico is locked, unreserved", inFlight.IP())
	}
	if now := v1ReservationVersions(t); !equalMaps(now, v1Written) {
		t.Fatalf("capo wrote v1 IPReservations after Calico locked v1: %v, were %v", now, v1Written)
	}

	if byCalico {
		said := ""
		testbed.Eventually(t, 2*time.Minute, "Calico's migration converged (v3 copied and unlocked)", func() bool {
			phase, msg, err := migration.Phase(ctx)
			if now := fmt.Sprint(phase, ": ", msg, " ", err); now != said {
				t.Logf("Calico's migration at %v: %s", time.Since(start).Round(time.Second), now)
				said = now
			}
			if phase == "Failed" {
				t.Fatalf("Calico's migration failed: %s (log %s)", msg, migration.Log())
			}
			return phase == "Converged" || phase == "Complete"
		})
	} else {
		bedMigrates(t)
	}

	// calico-node and capo move to v3 (CALICO_API_GROUP; the chart's
	// datastore.calicoAPIGroup), as the migration's last phase asks.
	env.Agent.Stop()
	ctl.Stop()
	inV3 := testbed.AgentOptions{Env: []string{apigroup.EnvGroup + "=" + apigroup.GroupV3}}
	env.Agent = env.StartAgentWith(inV3)
	env.Agent.WaitMetric(1, "capo_calico_api_info", `group="projectcalico.org/v3"`)
	env.StartControllerWith("after", inV3)
	testbed.Eventually(t, 30*time.Second, "the journaled DEL drained", func() bool {
		pending, err := env.Journal().Pending()
		return err == nil && len(pending) == 0
	})

	got := v3Reservations(t, env)
	for _, sb := range append(held[:len(held):len(held)], returning, inFlight) {
		e, ok := got[sb.IP()]
		if !ok || e.Pod != sb.Pod.Name || e.Namespace != env.Namespace {
			t.Fatalf("%s of %s after the migration: %+v (held: %v)", sb.IP(), sb.Pod.Name, e, got)
		}
		if was, ok := before[sb.IP()]; ok && (e.PodUID != was.PodUID || e.ReservedAt != was.ReservedAt) {
			t.Fatalf("%s's record changed in the migration: %+v, was %+v", sb.IP(), e, was)
		}
	}
	if len(got) != 4 {
		t.Fatalf("v3 reservations %v, want the 4 members'", got)
	}

	if !inV3Calico {
		t.Logf("%s is not set: the return to a held address and the release of the journaled DEL in v3 need a calico that runs in v3; capo's side is checked above", testbed.EnvCalicoBin)
		return
	}
	cs, err := kubernetes.NewForConfig(bed.REST)
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = client.NewIPAM(cs.CoreV1().RESTClient()).GetAssignmentAttributes(ctx, cnet.IP{IP: net.ParseIP(inFlight.IP())})
	if !errors.As(err, new(cerrors.ErrorResourceDoesNotExist)) {
		t.Fatalf("%s after the drain: %v, want released in v3 by calico-ipam", inFlight.IP(), err)
	}
	conflistV3 := env.ConflistWith(testbed.Capo, map[string]any{"calico_api_group": apigroup.GroupV3})
	env.DeletePod(returning.Pod.Name, 0)
	back := env.NewSandbox(env.CreatePod(returning.Pod.Name, redis), conflistV3)
	if err := back.Add(ctx); err != nil {
		t.Fatalf("ADD of the returning %s in v3: %v", returning.Pod.Name, err)
	}
	if back.IP() != returning.IP() {
		t.Fatalf("%s came back with %s, want its own %s", returning.Pod.Name, back.IP(), returning.IP())
	}
	env.Agent.WaitMetric(1, "capo_agent_address_returns_total", `outcome="returned"`)
	newcomer := env.NewSandbox(env.CreatePod("web-0", testbed.WithLabels(map[string]string{"app": "web"})), conflistV3)
	if err := newcomer.Add(ctx); err != nil {
		t.Fatal(err)
	}
	if _, heldFor := got[newcomer.IP()]; heldFor {
		t.Fatalf("a new pod got %s, held for %s", newcomer.IP(), got[newcomer.IP()].Pod)
	}
}

// bedMigrates takes the steps of Calico's migration after the lock: v3
// served, locked, everything copied as Calico converts it, v3 unlocked.
func bedMigrates(t *testing.T) {
	ctx := context.Background()
	for _, step := range []func() error{
		func() error { return bed.ServeCalicoV3(ctx) },
		func() error { return bed.LockCalico(ctx, apigroup.GroupV3, true) },
		func() error {
			counts, err := bed.CopyCalicoToV3(ctx)
			t.Logf("Calico's copy to v3: %v", counts)
			return err
		},
		func() error { return bed.LockCalico(ctx, apigroup.GroupV3, false) },
	} {
		if err := step(); err != nil {
			t.Fatal(err)
		}
	}
}

// v1ReservationVersions are the v1 IPReservations by name and version.
func v1ReservationVersions(t *testing.T) map[string]string {
	t.Helper()
	dyn, err := dynamic.NewForConfig(bed.REST)
	if err != nil {
		t.Fatal(err)
	}
	gvr := schema.GroupVersionResource{Group: "crd.projectcalico.org", Version: "v1", Resource: "ipreservations"}
	list, err := dyn.Resource(gvr).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, o := range list.Items {
		out[o.GetName()] = o.GetResourceVersion()
	}
	return out
}

// v3Reservations are capo's reservations for env's node read in v3.
func v3Reservations(t *testing.T, env *testbed.Env) map[string]reserve.Entry {
	t.Helper()
	objs, err := client.New(bed.REST)
	if err != nil {
		t.Fatal(err)
	}
	held, err := calicostore.NewOn(objs, reserve.DefaultLimits).ListNode(context.Background(), env.Node)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]reserve.Entry{}
	for _, e := range held {
		out[e.IP] = e
	}
	return out
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}
