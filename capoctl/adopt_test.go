package capoctl

import (
	"context"
	"net/netip"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/capo-net/capo/pkg/calico"
	"github.com/capo-net/capo/pkg/capoadopt"
	"github.com/capo-net/capo/pkg/release"
	"github.com/capo-net/capo/pkg/reserve"
)

// fakeCapo is Capo's IPReservation and Calico IPAM's allocations.
type fakeCapo struct {
	cidrs     []string
	allocated map[string]*calico.Holder
}

func (f *fakeCapo) CapoCIDRs(context.Context, string) ([]string, bool, error) {
	return f.cidrs, f.cidrs != nil, nil
}

func (f *fakeCapo) Who(_ context.Context, a netip.Addr) (*calico.Holder, error) {
	return f.allocated[a.String()], nil
}

func withCapo(t *testing.T, f *fakeCapo) {
	old := dialCapo
	dialCapo = func(*kubeFlags) (capoReader, error) { return f, nil }
	t.Cleanup(func() { dialCapo = old })
}

// capoTime is t as Capo's pod writes it: Shanghai's wall clock, no zone.
func capoTime(t time.Time) string {
	loc, _ := time.LoadLocation(capoadopt.DefaultZone)
	return t.In(loc).Format(capoadopt.TimeLayout)
}

func TestAdoptCapo(t *testing.T) {
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ip-reserve", Name: capoadopt.ConfigMapName},
		Data: map[string]string{
			"10.0.0.5": "kafka_broker-0_node-a_" + capoTime(now.Add(-10*time.Minute)),
			"10.0.0.6": "redis_redis-1_node-b_" + capoTime(now.Add(-30*time.Minute)),
			"10.0.0.7": "redis_redis-2_node-b_" + capoTime(now.Add(-time.Minute)),
		},
	}
	c := newCtl(t, cm)
	f := &fakeCapo{
		cidrs:     []string{"1.1.1.1", "10.0.0.5", "10.0.0.6", "10.0.0.5", "10.0.0.7"},
		allocated: map[string]*calico.Holder{"10.0.0.7": {Handle: "k8s-pod-network.x", Namespace: "web", Pod: "web-1"}},
	}
	withCapo(t, f)

	code, out, errw := c.run("", "adopt-capo", "--dry-run", "--timezone", capoadopt.DefaultZone)
	if code != 0 || !strings.Contains(squash(out), "10.0.0.5 kafka/broker-0 node-a 2026-11-21T11:50:00Z 10m0s 30m0s would adopt") ||
		!strings.Contains(out, "not adopted: 10.0.0.7: allocated since to pod web/web-1") || !strings.Contains(out, "0 adopted, 2 would be adopted") {
		t.Fatalf("dry run: exit %d\n%s%s", code, out, errw)
	}
	if l, _ := c.store.List(context.Background()); len(l.Entries) != 0 {
		t.Fatalf("a dry run wrote %v", l.Entries)
	}

	code, out, errw = c.run("", "adopt-capo", "--timezone", capoadopt.DefaultZone)
	if code != 0 || !strings.Contains(out, "2 adopted, 0 would be adopted, 0 already held") {
		t.Fatalf("adopt: exit %d\n%s%s", code, out, errw)
	}
	l, _ := c.store.List(context.Background())
	if len(l.Entries) != 2 || l.Entries[0].Node != "node-a" || l.Entries[0].Reason != reserve.ReasonCapo || !l.Entries[0].Seen.Equal(now.Add(-10*time.Minute)) || !l.Entries[1].Seen.Equal(now.Add(-30*time.Minute)) {
		t.Fatalf("store %+v", l.Entries)
	}
	// The expiry counts from Capo's time: the list says so.
	if _, out, _ = c.run("", "list"); !strings.Contains(squash(out), "10.0.0.6 redis/redis-1 node-b capo-adopted 30m0s 10m0s") {
		t.Fatalf("list:\n%s", out)
	}

	// Again: nothing new, nothing changed.
	if code, out, _ = c.run("", "adopt-capo", "--timezone", capoadopt.DefaultZone); code != 0 || !strings.Contains(out, "0 adopted, 0 would be adopted, 2 already held by capo") {
		t.Fatalf("again: exit %d\n%s", code, out)
	}

	if code, _, errw = c.run("", "adopt-capo", "--timezone", "Mars/Olympus"); code != 1 || !strings.Contains(errw, "--timezone") {
		t.Fatalf("bad zone: exit %d %s", code, errw)
	}
	// Capo gone: nothing to adopt, no zone asked for, and no error.
	f.cidrs = nil
	if code, out, _ = c.run("", "adopt-capo"); code != 0 || !strings.Contains(out, "nothing to adopt") {
		t.Fatalf("gone: exit %d\n%s", code, out)
	}
}

// Capo's running Deployment says its zone: its times are read in it
// unless --timezone says otherwise, and a disagreement is warned of.
func TestAdoptCapoReadsCapoZone(t *testing.T) {
	at := now.Add(-10 * time.Minute)
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ip-reserve", Name: capoadopt.ConfigMapName},
		Data:       map[string]string{"10.0.0.5": "kafka_broker-0_node-a_" + at.UTC().Format(capoadopt.TimeLayout)}, // TZ UTC
	}
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ip-reserve", Name: "capo"}}
	d.Spec.Template.Spec.Containers = []corev1.Container{{Name: "manager", Command: []string{"/manager"}, Args: []string{"--config=/capo_config.yaml"}, Env: []corev1.EnvVar{{Name: "TZ", Value: "UTC"}}}}
	c := newCtl(t, cm, d)
	withCapo(t, &fakeCapo{cidrs: []string{"1.1.1.1", "10.0.0.5"}})
	code, out, errw := c.run("", "adopt-capo", "--dry-run")
	if code != 0 || !strings.Contains(out, "zone UTC: the TZ of Capo's Deployment ip-reserve/capo") || !strings.Contains(squash(out), "10m0s 30m0s would adopt") {
		t.Fatalf("exit %d\n%s%s", code, out, errw)
	}
	// Told Shanghai, which would make it eight hours older: the later
	// reading, Capo's own zone's, is kept.
	code, out, errw = c.run("", "adopt-capo", "--dry-run", "--timezone", "Asia/Shanghai")
	if code != 0 || !strings.Contains(errw, "runs with TZ UTC") || !strings.Contains(squash(out), "10m0s 30m0s would adopt") {
		t.Fatalf("exit %d\n%s%s", code, out, errw)
	}
}

// Where nothing says the zone for certain (Capo removed, its TZ from a
// ConfigMap), adopt-capo stops, says why and asks for --timezone, and
// writes nothing; told, it reads the times in that zone alone.
func TestAdoptCapoNeverGuessesTheZone(t *testing.T) {
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ip-reserve", Name: capoadopt.ConfigMapName},
		Data:       map[string]string{"10.0.0.5": "kafka_broker-0_node-a_" + now.Add(-10*time.Minute).In(time.FixedZone("EST", -5*3600)).Format(capoadopt.TimeLayout)},
	}
	fromCM := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ip-reserve", Name: "capo"}}
	tz := corev1.EnvVar{Name: "TZ", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "clock"}, Key: "tz"}}}
	fromCM.Spec.Template.Spec.Containers = []corev1.Container{{Name: "manager", Args: []string{"--config=/capo_config.yaml"}, Env: []corev1.EnvVar{tz}}}
	for name, objs := range map[string][]runtime.Object{
		"no Deployment in ip-reserve runs Capo's manager": {cm},
		"TZ is set from ConfigMap clock key tz":           {cm, fromCM},
	} {
		c := newCtl(t, objs...)
		withCapo(t, &fakeCapo{cidrs: []string{"1.1.1.1", "10.0.0.5"}})
		code, out, errw := c.run("", "adopt-capo")
		if code != 1 || !strings.Contains(errw, name) || !strings.Contains(errw, "Give --timezone") || !strings.Contains(errw, "will not guess") {
			t.Fatalf("%s: exit %d\n%s%s", name, code, out, errw)
		}
		if l, _ := c.store.List(context.Background()); len(l.Entries) != 0 {
			t.Fatalf("%s: wrote %v", name, l.Entries)
		}
		code, out, errw = c.run("", "adopt-capo", "--dry-run", "--timezone", "America/New_York")
		if code != 0 || !strings.Contains(out, "zone America/New_York: --timezone") || !strings.Contains(squash(out), "10m0s 30m0s would adopt") {
			t.Fatalf("%s, told the zone: exit %d\n%s%s", name, code, out, errw)
		}
	}
}

// squash collapses a table's padding to single spaces.
func squash(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = strings.Join(strings.Fields(l), " ")
	}
	return strings.Join(lines, "\n")
}

// An address Capo lists without a readable time (Capo never releases it)
// is held one ipReserveTime from the controller's first sight, with no node.
func TestAdoptCapoWithoutATime(t *testing.T) {
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ip-reserve", Name: capoadopt.ConfigMapName},
		Data:       map[string]string{"10.0.0.5": "garbage"},
	}
	c := newCtl(t, cm)
	withCapo(t, &fakeCapo{cidrs: []string{"1.1.1.1", "10.0.0.5", "10.0.0.6"}})
	code, out, errw := c.run("", "adopt-capo", "--timezone", "UTC")
	if code != 0 || !strings.Contains(out, "2 adopted") || !strings.Contains(out, "held one ipReserveTime from adoption") {
		t.Fatalf("exit %d\n%s%s", code, out, errw)
	}
	l, _ := c.store.List(context.Background())
	if len(l.Entries) != 2 || l.Entries[0].Node != "" || !l.Entries[0].Seen.IsZero() || l.Entries[0].ReservedAt.IsZero() {
		t.Fatalf("%+v", l.Entries)
	}
	if code, out, _ = c.run("", "adopt-capo", "--timezone", "UTC"); code != 0 || !strings.Contains(out, "2 already held by capo") {
		t.Fatalf("again: exit %d\n%s", code, out)
	}
}

func TestAdoptCapoWarnsOverMaxCount(t *testing.T) {
	c := newCtl(t)
	cm := c.kube.CoreV1().ConfigMaps("capo-system")
	got, _ := cm.Get(context.Background(), "capo-config", metav1.GetOptions{})
	got.Data["config.yaml"] += "ipReserveMaxCount: 1\n"
	if _, err := cm.Update(context.Background(), got, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	withCapo(t, &fakeCapo{cidrs: []string{"1.1.1.1", "10.0.0.5", "10.0.0.6"}})
	if code, _, errw := c.run("", "adopt-capo", "--dry-run"); code != 0 || !strings.Contains(errw, "over ipReserveMaxCount 1") {
		t.Fatalf("exit %d: %s", code, errw)
	}
}

// An address whose time is past its reservation time by capo's rules is
// not adopted: capo would release it at once; Capo's copy holds it until
// Capo's objects go.
func TestAdoptCapoSkipsWhatHasExpired(t *testing.T) {
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ip-reserve", Name: capoadopt.ConfigMapName},
		Data: map[string]string{
			"10.0.0.5": "kafka_broker-0_node-a_" + capoTime(now.Add(-50*time.Minute)),
			"10.0.0.6": "zoo_keeper-0_node-a_" + capoTime(now.Add(-50*time.Minute)), // its namespace keeps for 2h
		},
	}
	zoo := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "zoo", Annotations: map[string]string{release.TTLAnnotation: "2h"}}}
	c := newCtl(t, cm, zoo)
	withCapo(t, &fakeCapo{cidrs: []string{"1.1.1.1", "10.0.0.5", "10.0.0.6"}})
	code, out, errw := c.run("", "adopt-capo", "--timezone", capoadopt.DefaultZone)
	if code != 0 || !strings.Contains(squash(out), "10.0.0.5 kafka/broker-0 node-a 2026-11-21T11:10:00Z 50m0s due not adopted: expired under 40m0s (ipReserveTime)") ||
		!strings.Contains(out, "1 adopted, 0 would be adopted, 0 already held by capo, 0 failed, 1 not adopted") {
		t.Fatalf("exit %d\n%s%s", code, out, errw)
	}
}
