package capoctl

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/capo-net/capo/pkg/release"
	"github.com/capo-net/capo/pkg/selection"
)

func TestListAndExplainShowTheReservationTime(t *testing.T) {
	yes := true
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "worker-3", Annotations: map[string]string{selection.NodeAnnotation: selection.Enabled}}}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kafka", Labels: map[string]string{selection.NamespaceLabel: selection.Enabled}, Annotations: map[string]string{release.TTLAnnotation: "90m"}}}
	set := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: "kafka", Name: "broker", Annotations: map[string]string{release.TTLAnnotation: "6h"}}}
	zk := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: "kafka", Name: "zk", Annotations: map[string]string{release.TTLAnnotation: "soon", release.ScaleDownAnnotation: release.Keep}}}
	owner := []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "zk", UID: types.UID("uid-zk"), Controller: &yes}}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "kafka", Name: "zk-0", Labels: map[string]string{"statefulset.kubernetes.io/pod-name": "zk-0"}, OwnerReferences: owner},
		Spec:       corev1.PodSpec{NodeName: "worker-3"},
	}
	c := newCtl(t, node, ns, set, zk, pod)
	c.reserve("worker-3", entry("10.42.7.19", "broker-2", 10*time.Minute)) // StatefulSet broker: 6h, from the controller's first sight (none yet)
	loose := entry("10.42.7.20", "web-1", 10*time.Minute)
	loose.OwnerKind, loose.OwnerName = "", ""
	c.reserve("worker-3", loose) // namespace: 90m

	code, out, errw := c.run("", "list", "-o", "json")
	var rows []map[string]any
	if err := json.Unmarshal([]byte(out), &rows); err != nil || code != 0 || len(rows) != 2 {
		t.Fatalf("exit %d, %v:\n%s%s", code, err, out, errw)
	}
	if rows[0]["reserveTime"] != "6h0m0s" || rows[0]["reserveTimeFrom"] != "statefulset" || rows[0]["expiresAt"] != "2026-11-21T18:00:00Z" ||
		rows[1]["reserveTime"] != "1h30m0s" || rows[1]["reserveTimeFrom"] != "namespace" {
		t.Fatalf("rows %v", rows)
	}
	if _, out, _ = c.run("", "list"); !strings.Contains(squash(out), "10.42.7.19 kafka/broker-2 worker-3 cni-del 10m0s 6h0m 6h0m0s (statefulset)") {
		t.Fatalf("list:\n%s", out)
	}

	// zk's annotation is wrong: the namespace's applies, and explain says why.
	code, out, errw = c.run("", "explain", "kafka/zk-0")
	if code != 0 || !strings.Contains(out, "lasts up to 1h30m0s (namespace capo.io/ip-reserve-time)") || !strings.Contains(out, "a scale-down that removes it keeps it held") || !strings.Contains(out, "if StatefulSet zk is deleted, it is released") || !strings.Contains(out, `WARNING: StatefulSet kafka/zk: capo.io/ip-reserve-time="soon" is not a duration`) {
		t.Fatalf("explain: exit %d\n%s%s", code, out, errw)
	}
}
