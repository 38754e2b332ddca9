package e2e

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	apiv3 "github.com/projectcalico/api/pkg/apis/projectcalico/v3"
	"github.com/projectcalico/calico/libcalico-go/lib/options"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/capo-net/capo/pkg/capoadopt"
	"github.com/capo-net/capo/pkg/reserve"
	"github.com/capo-net/capo/test/testbed"
)

// capoSim writes Capo's objects exactly as Capo (xdfdotcn/capo v1.0.1)
// does, through Calico's v3 API as calico-apiserver stores it: at start an
// empty ConfigMap and the IPReservation with its placeholder; on a pod
// delete, a merge patch of the address's record and an append to the list
// (a JSON patch "add /spec/reservedCIDRs/-", no dedupe); on its release
// pass, the list deduped and sorted without the address, and the record
// deleted. Times are Shanghai wall clock with no zone, as its chart's TZ.
type capoSim struct {
	t   *testing.T
	env *testbed.Env
	ns  string
	loc *time.Location
}

func newCapoSim(t *testing.T, env *testbed.Env) *capoSim {
	ctx := context.Background()
	loc, err := time.LoadLocation(capoadopt.DefaultZone)
	if err != nil {
		t.Fatal(err)
	}
	s := &capoSim{t: t, env: env, ns: "ip-reserve-" + env.ID, loc: loc}
	if _, err := env.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: s.ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Kube.CoreV1().ConfigMaps(s.ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: capoadopt.ConfigMapName, Namespace: s.ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	res := apiv3.NewIPReservation()
	res.Name = capoadopt.ReservationName
	res.Spec.ReservedCIDRs = []string{capoadopt.Placeholder}
	if _, err := env.Calico.IPReservations().Create(ctx, res, options.SetOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.remove() })
	return s
}

// deploy creates Capo's Deployment as its chart renders it (what
// adopt-capo reads: the manager's --config argument and its TZ). No
// controller-manager runs here: it starts no pod.
func (s *capoSim) deploy() {
	s.t.Helper()
	labels := map[string]string{"control-plane": "controller-manager"}
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "capo", Namespace: s.ns}, Spec: appsv1.DeploymentSpec{
		Selector: &metav1.LabelSelector{MatchLabels: labels},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "manager", Image: "xdfdotcn/ip-reserve-delay-release:v1.0.1", Command: []string{"/manager"}, Args: []string{"--config=/capo_config.yaml"},
			Env: []corev1.EnvVar{{Name: "POD_NAMESPACE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}}, {Name: "TZ", Value: "Asia/Shanghai"}},
		}}}},
	}}
	if _, err := s.env.Kube.AppsV1().Deployments(s.ns).Create(context.Background(), d, metav1.CreateOptions{}); err != nil {
		s.t.Fatal(err)
	}
}

// undeploy is Capo's webhook and Deployment removed (steps 3 and 4).
func (s *capoSim) undeploy() {
	s.t.Helper()
	if err := s.env.Kube.AppsV1().Deployments(s.ns).Delete(context.Background(), "capo", metav1.DeleteOptions{}); err != nil {
		s.t.Fatal(err)
	}
}

// reserve is Capo's webhook admitting the delete of pod (holding ip) at at.
func (s *capoSim) reserve(pod, ip string, at time.Time) {
	s.t.Helper()
	ctx := context.Background()
	patch, _ := json.Marshal(map[string]any{"data": map[string]string{ip: s.env.Namespace + "_" + pod + "_" + s.env.Node + "_" + at.In(s.loc).Format(capoadopt.TimeLayout)}})
	if _, err := s.env.Kube.CoreV1().ConfigMaps(s.ns).Patch(ctx, capoadopt.ConfigMapName, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		s.t.Fatal(err)
	}
	s.edit(func(cidrs []string) []string { return append(cidrs, ip) })
}

// release is Capo's release pass ending ip.
func (s *capoSim) release(ip string) {
	s.t.Helper()
	s.edit(func(cidrs []string) []string {
		cidrs = slices.DeleteFunc(cidrs, func(c string) bool { return c == ip })
		slices.Sort(cidrs)
		return slices.Compact(cidrs)
	})
	patch, _ := json.Marshal(map[string]any{"data": map[string]any{ip: nil}})
	if _, err := s.env.Kube.CoreV1().ConfigMaps(s.ns).Patch(context.Background(), capoadopt.ConfigMapName, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		s.t.Fatal(err)
	}
}

func (s *capoSim) edit(f func([]string) []string) {
	s.t.Helper()
	ctx := context.Background()
	res, err := s.env.Calico.IPReservations().Get(ctx, capoadopt.ReservationName, options.GetOptions{})
	if err != nil {
		s.t.Fatal(err)
	}
	res.Spec.ReservedCIDRs = f(res.Spec.ReservedCIDRs)
	if _, err := s.env.Calico.IPReservations().Update(ctx, res, options.SetOptions{}); err != nil {
		s.t.Fatal(err)
	}
}

// versions are the resource versions of Capo's two objects: capo must
// never change them.
func (s *capoSim) versions() string {
	s.t.Helper()
	ctx := context.Background()
	res, err := s.env.Calico.IPReservations().Get(ctx, capoadopt.ReservationName, options.GetOptions{})
	if err != nil {
		s.t.Fatal(err)
	}
	cm, err := s.env.Kube.CoreV1().ConfigMaps(s.ns).Get(ctx, capoadopt.ConfigMapName, metav1.GetOptions{})
	if err != nil {
		s.t.Fatal(err)
	}
	return res.ResourceVersion + "/" + cm.ResourceVersion
}

// remove is the switch procedure's last step: Capo's objects deleted.
func (s *capoSim) remove() {
	ctx := context.Background()
	_, _ = s.env.Calico.IPReservations().Delete(ctx, capoadopt.ReservationName, options.DeleteOptions{})
	_ = s.env.Kube.CoreV1().Namespaces().Delete(ctx, s.ns, metav1.DeleteOptions{})
}

// deleteUnderCapo is a pod delete while Capo's webhook runs: Capo reserves,
// the object goes, the sandbox is torn down through plain Calico.
func deleteUnderCapo(t *testing.T, env *testbed.Env, capo *capoSim, sb *testbed.Sandbox, at time.Time) {
	t.Helper()
	capo.reserve(sb.Pod.Name, sb.IP(), at)
	env.DeletePod(sb.Pod.Name, 0)
	if err := sb.Del(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// fillPlain adds pods through plain Calico until the pool is full, and
// returns the addresses they got.
func fillPlain(t *testing.T, env *testbed.Env, prefix string) []string {
	t.Helper()
	var got []string
	for i := range 9 {
		sb := env.NewSandbox(env.CreatePod(prefix+"-"+string(rune('a'+i))), env.Conflist(testbed.PlainCalico))
		if err := sb.Add(context.Background()); err != nil {
			return got
		}
		got = append(got, sb.IP())
	}
	t.Fatalf("a /29 took 9 more pods: %v", got)
	return nil
}

func adoptCapo(t *testing.T, env *testbed.Env, capo *capoSim, args ...string) string {
	t.Helper()
	out, code := capoctl(t, env, "", append([]string{"adopt-capo", "--from-namespace=" + capo.ns}, args...)...)
	if code != 0 {
		t.Fatalf("adopt-capo %v: exit %d\n%s", args, code, out)
	}
	return squash(out)
}

func squash(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = strings.Join(strings.Fields(l), " ")
	}
	return strings.Join(lines, "\n")
}

// The switch while Capo runs, step by step (docs/coming-from-capo.md):
// capo installed, adopt, Capo keeps reserving and releasing, adopt again,
// Capo's webhook and Deployment removed, adopt again, Capo's objects
// deleted. Both hold meanwhile; each releases only its own copy; an address
// stays held while either does; capo never writes Capo's objects.
func TestAdoptCapoWhileCapoRuns(t *testing.T) {
	env := bed.NewEnv(t, testbed.Kubernetes, testbed.EnvOptions{PoolPrefix: 29, OptIn: true}) // Capo needs the Kubernetes datastore
	env.SetConfig(configWith("ipReserveTime: 1h\n"))
	capo := newCapoSim(t, env)
	capo.deploy()
	plain := env.Conflist(testbed.PlainCalico)
	redis := env.AddPods("redis", 4, plain, testbed.StatefulPod("redis"))
	web := env.AddPods("web", 1, plain)[0]
	now := time.Now()
	deleteUnderCapo(t, env, capo, redis[0], now.Add(-10*time.Minute))
	capo.edit(func(c []string) []string { return append(c, redis[0].IP()) }) // a second delete of the pod: listed twice
	deleteUnderCapo(t, env, capo, redis[1], now.Add(-2*time.Hour))           // past capo's hour (Capo's time was longer)
	capo.reserve("gone-0", web.IP(), now.Add(-5*time.Minute))                // listed by Capo, allocated since to web-0

	before := capo.versions()
	out := adoptCapo(t, env, capo, "--dry-run")
	for _, want := range []string{
		"zone Asia/Shanghai: the TZ of Capo's Deployment " + capo.ns + "/capo",
		redis[0].IP() + " " + env.Namespace + "/redis-0 " + env.Node + " ",
		" 10m", " 49m5", // held 10m, expires in 49m5x: the hour counts from Capo's time
		redis[1].IP() + " " + env.Namespace + "/redis-1",
		"not adopted: expired under 1h0m0s (ipReserveTime)",
		"not adopted: " + web.IP() + ": allocated since to pod " + env.Namespace + "/web-0",
		"0 adopted, 1 would be adopted, 0 already held by capo, 0 failed, 2 not adopted",
	} {
		if !strings.Contains(out, want) {
			t.Fatalf("dry run lacks %q:\n%s", want, out)
		}
	}
	if got := env.Reservations(); len(got) != 0 {
		t.Fatalf("a dry run wrote %v", got)
	}

	out = adoptCapo(t, env, capo)
	if !strings.Contains(out, "1 adopted, 0 would be adopted, 0 already held") {
		t.Fatalf("adopt:\n%s", out)
	}
	e := env.Reservations()[redis[0].IP()]
	if e.Reason != reserve.ReasonCapo || e.Pod != "redis-0" || e.Seen.Sub(now.Add(-10*time.Minute)).Abs() > time.Second {
		t.Fatalf("adopted %+v: want Capo's pod and time", e)
	}

	// Capo keeps running: another delete, then adopt again.
	deleteUnderCapo(t, env, capo, redis[2], time.Now())
	if out = adoptCapo(t, env, capo); !strings.Contains(out, "1 adopted, 0 would be adopted, 1 already held by capo") {
		t.Fatalf("adopt again:\n%s", out)
	}
	env.StartController("c1")
	time.Sleep(3 * time.Second) // passes every second: nothing is due
	if !held(env, redis[0].IP()) || !held(env, redis[2].IP()) {
		t.Fatalf("released early: %v", env.Reservations())
	}
	// Capo's pass ends its copy of redis-0; capo's still holds it.
	capo.release(redis[0].IP())
	after := capo.versions()

	// Capo's webhook and Deployment removed: nothing says the zone any
	// more, so adopt-capo asks for it; told, it adopts once more.
	capo.undeploy()
	if out, code := capoctl(t, env, "", "adopt-capo", "--from-namespace="+capo.ns); code != 1 || !strings.Contains(out, "Give --timezone") {
		t.Fatalf("adopt after Capo is removed, no --timezone: exit %d\n%s", code, out)
	}
	out = adoptCapo(t, env, capo, "--timezone="+capoadopt.DefaultZone)
	if !strings.Contains(out, "zone Asia/Shanghai: --timezone") || !strings.Contains(out, "0 adopted, 0 would be adopted, 1 already held by capo") {
		t.Fatalf("adopt after Capo is removed:\n%s", out)
	}
	if before == after || capo.versions() != after {
		t.Fatalf("Capo's objects: %s before adopting, %s after Capo's last write, %s now: capo must not write them", before, after, capo.versions())
	}

	// Capo's objects deleted: what capo adopted stays held; redis-1, which
	// capo's hour had ended, is free.
	capo.remove()
	got := fillPlain(t, env, "fill")
	for _, ip := range got {
		if ip == redis[0].IP() || ip == redis[2].IP() {
			t.Fatalf("a new pod got %s, adopted from Capo", ip)
		}
	}
	if !slices.Contains(got, redis[1].IP()) {
		t.Fatalf("new pods got %v; redis-1's %s was held by nobody once Capo's objects went", got, redis[1].IP())
	}
}

// Capo is gone (webhook and Deployment removed) and its objects remain:
// adopt, delete them, and the TTL continues from Capo's times.
func TestAdoptCapoAfterCapoIsGone(t *testing.T) {
	env := bed.NewEnv(t, testbed.Kubernetes, testbed.EnvOptions{PoolPrefix: 29, OptIn: true})
	env.SetConfig(configWith("ipReserveTime: 60s\n"))
	capo := newCapoSim(t, env)
	plain := env.Conflist(testbed.PlainCalico)
	redis := env.AddPods("redis", 3, plain, testbed.StatefulPod("redis"))
	now := time.Now()
	deleteUnderCapo(t, env, capo, redis[0], now.Add(-20*time.Second))
	deleteUnderCapo(t, env, capo, redis[1], now.Add(-5*time.Minute)) // Capo died before releasing it

	out := adoptCapo(t, env, capo, "--timezone="+capoadopt.DefaultZone)
	if !strings.Contains(out, "1 adopted") || !strings.Contains(out, "not adopted: expired under 1m0s (ipReserveTime)") || !strings.Contains(out, "zone Asia/Shanghai: --timezone") {
		t.Fatalf("adopt:\n%s", out)
	}
	capo.remove()
	eventually(t, 10*time.Second, "Capo's IPReservation gone", func() bool {
		_, err := env.Calico.IPReservations().Get(context.Background(), capoadopt.ReservationName, options.GetOptions{})
		return err != nil
	})
	if out := adoptCapo(t, env, capo); !strings.Contains(out, "nothing to adopt") {
		t.Fatalf("adopt once Capo's objects are gone:\n%s", out)
	}
	// Only capo holds redis-0's now, and Calico honours that.
	got := fillPlain(t, env, "fill")
	if slices.Contains(got, redis[0].IP()) || !slices.Contains(got, redis[1].IP()) {
		t.Fatalf("new pods got %v: want redis-1's %s (expired) and never redis-0's %s", got, redis[1].IP(), redis[0].IP())
	}

	// The TTL counts from Capo's time: redis-0 goes some 40s after the
	// adoption, not a whole minute after it.
	adopted := time.Now()
	c := env.StartController("c1")
	time.Sleep(2 * time.Second)
	if !held(env, redis[0].IP()) {
		t.Fatalf("redis-0 released %s after adoption, before its 60s from Capo's time", time.Since(adopted))
	}
	eventually(t, 60*time.Second, "redis-0 released", func() bool { return !held(env, redis[0].IP()) })
	if d := time.Since(now); d > 75*time.Second {
		t.Fatalf("redis-0 released %s after Capo reserved it; ipReserveTime is 60s from Capo's time", d)
	}
	c.WaitMetric(1, "capo_controller_releases_total", `reason="ttl"`)
}
