package capoctl

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/capo-net/capo/pkg/config"
	"github.com/capo-net/capo/pkg/reserve"
	"github.com/capo-net/capo/pkg/reserve/calicostore"
	"github.com/capo-net/capo/pkg/reserve/reservetest"
	"github.com/capo-net/capo/pkg/selection"
)

var now = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)

// ctl is capoctl on a fake clientset and the fake store.
type ctl struct {
	t     *testing.T
	kube  *fake.Clientset
	store *reservetest.Store
}

func newCtl(t *testing.T, objs ...runtime.Object) *ctl {
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: "capo-system", Name: "capo-config"},
		Data:       map[string]string{config.ConfigMapKey: "apiVersion: config.capo.io/v1\nkind: CapoConfig\nipReserveTime: 40m\n"},
	}
	return &ctl{t: t, kube: fake.NewClientset(append(objs, cm)...), store: reservetest.NewStore(reserve.DefaultLimits)}
}

func (c *ctl) reserve(node string, es ...reserve.Entry) {
	c.t.Helper()
	if _, err := c.store.Reserve(context.Background(), node, es); err != nil {
		c.t.Fatal(err)
	}
}

// run runs a command line with stdin; it returns the exit code and output.
func (c *ctl) run(stdin string, args ...string) (int, string, string) {
	var out, errw bytes.Buffer
	dial := func(*kubeFlags) (*clients, error) {
		return &clients{kube: c.kube, store: c.store}, nil
	}
	code := run(args, strings.NewReader(stdin), &out, &errw, dial, now, "capoctl")
	return code, out.String(), errw.String()
}

func entry(ip, pod string, age time.Duration) reserve.Entry {
	return reserve.Entry{IP: ip, Namespace: "kafka", Pod: pod, Reason: reserve.ReasonCNIDel, ReservedAt: now.Add(-age), OwnerKind: "StatefulSet", OwnerName: "broker"}
}

func TestListTableAndJSON(t *testing.T) {
	c := newCtl(t)
	c.reserve("worker-3", entry("10.42.7.19", "broker-2", 12*time.Minute))
	c.reserve("worker-5", entry("fd00::9", "broker-5", time.Hour))
	// The age is the agent's; the expiry counts from the controller's first sight.
	if err := c.store.Stamp(context.Background(), []reserve.Ref{{Node: "worker-3", IP: "10.42.7.19"}}, now.Add(-2*time.Minute)); err != nil {
		t.Fatal(err)
	}
	code, out, _ := c.run("", "list", "--node", "worker-3")
	if code != 0 || !strings.Contains(out, "10.42.7.19  kafka/broker-2  worker-3  cni-del  12m0s  38m0s") || strings.Contains(out, "fd00::9") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	if err := c.store.Stamp(context.Background(), []reserve.Ref{{Node: "worker-5", IP: "fd00::9"}}, now); err != nil {
		t.Fatal(err)
	}
	code, out, _ = c.run("", "list", "-o", "json", "--namespace", "kafka")
	var rows []map[string]any
	if err := json.Unmarshal([]byte(out), &rows); err != nil || code != 0 || len(rows) != 2 {
		t.Fatalf("exit %d, %v:\n%s", code, err, out)
	}
	if rows[1]["node"] != "worker-5" || rows[1]["seen"] != "2026-11-21T12:00:00Z" || rows[0]["seen"] != "2026-11-21T11:58:00Z" || rows[1]["expiresAt"] != "2026-11-21T12:40:00Z" {
		t.Fatalf("rows %v", rows)
	}
}

func TestReleaseAsksAndComparesAddressesAsValues(t *testing.T) {
	c := newCtl(t)
	c.reserve("worker-5", entry("fd00::9", "broker-5", time.Hour), entry("fd00::10", "broker-6", time.Hour))
	if code, out, _ := c.run("n\n", "release", "FD00:0::9"); code != 0 || !strings.Contains(out, "nothing released") {
		t.Fatalf("answered no: exit %d\n%s", code, out)
	}
	code, out, _ := c.run("", "release", "FD00:0::9/128", "--yes")
	if code != 0 || !strings.Contains(out, "fd00::9  kafka/broker-5  node worker-5") || !strings.Contains(out, "released 1") {
		t.Fatalf("exit %d\n%s", code, out)
	}
	held, _ := c.store.ListNode(context.Background(), "worker-5")
	if len(held) != 1 || held[0].IP != "fd00::10" {
		t.Fatalf("held %+v", held)
	}
	if code, _, errw := c.run("", "release", "10.9.9.9", "--yes"); code != 1 || !strings.Contains(errw, "nothing held matches") {
		t.Fatalf("a release matching nothing: exit %d, %q", code, errw)
	}
	if code, _, errw := c.run("", "release", "10.9.9.300", "--yes"); code != 1 || !strings.Contains(errw, "not an IP") {
		t.Fatalf("a bad address: exit %d, %q", code, errw)
	}
}

func TestListWarnsOfUnreadableObjects(t *testing.T) {
	c := newCtl(t)
	c.reserve("worker-3", entry("10.42.7.19", "broker-2", time.Minute))
	name := calicostore.BucketName(calicostore.BucketOf("worker-3"), 0)
	o, _ := c.store.Objects.Object(name)
	o.Annotations[calicostore.MetadataAnnotation] = "z2:garbage"
	c.store.Objects.Put(o)
	code, out, errw := c.run("", "list")
	if code != 0 || !strings.Contains(out, "(no reservations)") || !strings.Contains(errw, name+" does not decode") {
		t.Fatalf("exit %d\n%s\n%s", code, out, errw)
	}
}

func TestExplainASelectedPod(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "worker-3", Annotations: map[string]string{selection.NodeAnnotation: selection.Enabled}}}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kafka", Labels: map[string]string{selection.NamespaceLabel: selection.Enabled}}}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "kafka", Name: "broker-2", Labels: map[string]string{"statefulset.kubernetes.io/pod-name": "broker-2"}},
		Spec:       corev1.PodSpec{NodeName: "worker-3"},
	}
	c := newCtl(t, node, ns, pod)
	c.reserve("worker-3", entry("10.42.7.19", "broker-2", 10*time.Minute))
	code, out, errw := c.run("", "explain", "kafka/broker-2")
	if code != 0 || !strings.Contains(out, "RESERVED on teardown") || !strings.Contains(out, "held now: 10.42.7.19 (cni-del, 10m0s ago, expires in 40m0s)") {
		t.Fatalf("exit %d\n%s%s", code, out, errw)
	}
}

// The entry shown is renewed (its pod torn down again) before the release
// writes: the renewed one is kept, and the operator told so.
func TestReleaseEndsOnlyWhatItShowed(t *testing.T) {
	c := newCtl(t)
	shown := entry("10.42.7.19", "broker-2", time.Hour)
	shown.Sandbox = "aaaa"
	c.reserve("worker-3", shown)
	renewed := shown
	renewed.Sandbox, renewed.ReservedAt = "bbbb", now
	agent := c.store.Clone(reserve.DefaultLimits)
	done := false
	c.store.Objects.Before = func(verb, _ string) error {
		if verb == "update" && !done {
			done = true
			if _, err := agent.Reserve(context.Background(), "worker-3", []reserve.Entry{renewed}); err != nil {
				t.Error(err)
			}
		}
		return nil
	}
	code, out, _ := c.run("", "release", "10.42.7.19", "--yes")
	c.store.Objects.Before = nil
	if code != 0 || !strings.Contains(out, "released 0") || !strings.Contains(out, "1 changed since listed") {
		t.Fatalf("exit %d\n%s", code, out)
	}
	if held, _ := c.store.ListNode(context.Background(), "worker-3"); len(held) != 1 || held[0].Sandbox != "bbbb" {
		t.Fatalf("held %+v: the renewed reservation was released", held)
	}
}
