package node

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/capo-net/capo/test/nodebed"
)

// ttl is the reservation time the test writes into capo's ConfigMap.
const ttl = 6 * time.Second

// capo-controller, running from the chart, releases a reservation when the
// ipReserveTime set in its ConfigMap has passed (reloaded without a
// restart), and Calico then gives the address out again: here to the
// StatefulSet's own replacement pod, waiting on a full pool.
func TestControllerReleasesByTTLFromTheConfigMap(t *testing.T) {
	ctx := context.Background()
	pool, cidr := bed.NewPool(t, 30) // 4 addresses
	ns := bed.Namespace(t, "ttl", pool, true)
	bed.OptIn(t)
	bed.StatefulSet(t, ns, "nats", 4, nodebed.Workload{NoReturn: true}) // the address waits for its TTL, not for nats-2
	old := bed.WaitRunning(t, ns, "app=nats", 4)["nats-2"]
	ip := old.Status.PodIP
	setConfig(t, "ipReserveTime: 40m", fmt.Sprintf("ipReserveTime: %s", ttl), "ipReleasePeriod: 5s", "ipReleasePeriod: 1s")

	if err := bed.Kube.CoreV1().Pods(ns).Delete(ctx, old.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	nodebed.Eventually(t, 30*time.Second, "nats-2's address held", func() error { return bed.Held(ctx, cidr, ip, old) })
	entries, err := bed.Reservations(ctx)
	if err != nil {
		t.Fatal(err)
	}
	reservedAt := entries[ip].ReservedAt
	nodebed.Eventually(t, 30*time.Second, "the controller to release "+ip, func() error {
		reserved, err := bed.Reserved(ctx)
		if err == nil && reserved[ip] {
			err = fmt.Errorf("%s still reserved", ip)
		}
		return err
	})
	if held := time.Since(reservedAt); held < ttl {
		t.Fatalf("%s released after %s, before its TTL of %s", ip, held, ttl)
	}
	nodebed.Eventually(t, 3*time.Minute, "the replacement nats-2 to get the released address", func() error {
		p := bed.Pod(ns, old.Name)
		if p == nil || p.UID == old.UID || p.Status.PodIP != ip {
			return fmt.Errorf("the new nats-2 has no address %s yet", ip)
		}
		return bed.AllocatedTo(ctx, cidr, ip, p)
	})
}

// setConfig edits capo's ConfigMap as `kubectl edit` would, each pair of
// arguments an old line and its replacement; the original comes back
// after the test.
func setConfig(t *testing.T, oldNew ...string) {
	t.Helper()
	ctx := context.Background()
	cms := bed.Kube.CoreV1().ConfigMaps(nodebed.Namespace)
	cm, err := cms.Get(ctx, "capo-config", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	orig := cm.Data["config.yaml"]
	edited := strings.NewReplacer(oldNew...).Replace(orig)
	if edited == orig {
		t.Fatalf("capo-config has none of %v:\n%s", oldNew, orig)
	}
	cm.Data["config.yaml"] = edited
	if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cm, err := cms.Get(ctx, "capo-config", metav1.GetOptions{})
		if err == nil {
			cm.Data["config.yaml"] = orig
			_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
		}
		if err != nil {
			t.Errorf("restoring capo-config: %v", err)
		}
	})
}
