package nativev3

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	apiv3 "github.com/projectcalico/api/pkg/apis/projectcalico/v3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/capo-net/capo/pkg/capoadopt"
	"github.com/capo-net/capo/pkg/reserve"
	"github.com/capo-net/capo/test/testbed"
)

// capoObjects writes Capo's (xdfdotcn/capo) two objects as it leaves them
// on a native-v3 cluster: its IPReservation in projectcalico.org/v3 (the
// placeholder, then each address) and its ConfigMap of records
// "<namespace>_<pod>_<node>_<Shanghai wall clock>", in namespace ns. It
// returns a func that deletes them, the switch's last step.
func capoObjects(t *testing.T, env *testbed.Env, ns string, records map[string]string) func() {
	t.Helper()
	ctx := context.Background()
	if _, err := env.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: capoadopt.ConfigMapName, Namespace: ns}, Data: records}
	if _, err := env.Kube.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cs, err := bed.CalicoV3()
	if err != nil {
		t.Fatal(err)
	}
	res := apiv3.NewIPReservation()
	res.Name = capoadopt.ReservationName
	// Calico's v3 CRD takes CIDRs only (format cidr): Capo's bare
	// addresses are written as /32, the only form it can hold them in.
	res.Spec.ReservedCIDRs = []string{capoadopt.Placeholder + "/32"}
	for ip := range records {
		res.Spec.ReservedCIDRs = append(res.Spec.ReservedCIDRs, ip+"/32")
	}
	if _, err := cs.ProjectcalicoV3().IPReservations().Create(ctx, res, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	remove := func() {
		_ = cs.ProjectcalicoV3().IPReservations().Delete(ctx, res.Name, metav1.DeleteOptions{})
		_ = env.Kube.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
	}
	t.Cleanup(remove)
	return remove
}

func squash(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = strings.Join(strings.Fields(l), " ")
	}
	return strings.Join(lines, "\n")
}

// capoctl adopt-capo in native v3 mode, as TestAdoptCapoAfterCapoIsGone
// proves it in v1: Capo's projectcalico.org/v3 IPReservation and its
// ConfigMap are read; an address Calico's v3 IPAM has given to another pod
// since is not adopted; the one Capo holds is adopted into capo's v3 store
// with Capo's pod and time; once Capo's objects are deleted, calico-ipam
// in v3 mode gives every other free address to new pods, never the adopted
// one.
func TestV3AdoptCapo(t *testing.T) {
	testbed.SkipWithoutCalicoFromEnv(t)
	ctx := context.Background()
	env := bed.NewEnv(t, testbed.Kubernetes, testbed.EnvOptions{PoolPrefix: 29, OptIn: true, CalicoRelease: testbed.CalicoFromEnv})
	env.SetConfig(releaseEverySecond + "ipReserveTime: 1h\n")
	plain := env.Conflist(testbed.PlainCalico)
	redis := env.AddPods("redis", 2, plain, testbed.StatefulPod("redis"))
	web := env.AddPods("web", 1, plain)[0]
	for _, sb := range redis[:1] { // deleted under Capo: its webhook reserved, plain Calico released
		env.DeletePod(sb.Pod.Name, 0)
		if err := sb.Del(ctx); err != nil {
			t.Fatal(err)
		}
	}
	shanghai, err := time.LoadLocation(capoadopt.DefaultZone)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Now().Add(-10 * time.Minute)
	record := func(pod string) string {
		return env.Namespace + "_" + pod + "_" + env.Node + "_" + at.In(shanghai).Format(capoadopt.TimeLayout)
	}
	ns := "ip-reserve-" + env.ID
	remove := capoObjects(t, env, ns, map[string]string{redis[0].IP(): record("redis-0"), web.IP(): record("gone-0")})

	out, code := env.Capoctl(nil, "adopt-capo", "--from-namespace="+ns, "--timezone="+capoadopt.DefaultZone)
	out = squash(out)
	if code != 0 {
		t.Fatalf("adopt-capo in v3: exit %d\n%s", code, out)
	}
	for _, want := range []string{
		redis[0].IP() + " " + env.Namespace + "/redis-0 " + env.Node + " ",
		"not adopted: " + web.IP() + ": allocated since to pod " + env.Namespace + "/web-0",
		"1 adopted, 0 would be adopted, 0 already held by capo, 0 failed, 1 not adopted",
	} {
		if !strings.Contains(out, want) {
			t.Fatalf("adopt-capo in v3 lacks %q:\n%s", want, out)
		}
	}
	e, ok := env.Reservations()[redis[0].IP()]
	if !ok || e.Reason != reserve.ReasonCapo || e.Pod != "redis-0" || e.Seen.Sub(at).Abs() > time.Second {
		t.Fatalf("adopted in v3: %+v (%v), want Capo's pod and time", e, ok)
	}

	remove()
	env.StartController("c1") // passes every second: nothing is due for an hour
	var got []string
	for i := range 9 {
		sb := env.NewSandbox(env.CreatePod("fill-"+string(rune('a'+i))), plain)
		if err := sb.Add(ctx); err != nil {
			break
		}
		got = append(got, sb.IP())
	}
	if len(got) != 5 || slices.Contains(got, redis[0].IP()) {
		t.Fatalf("new pods got %v: want the five free addresses of the /29, never the adopted %s", got, redis[0].IP())
	}
}
