package agent

import (
	"context"
	"testing"
	"time"

	cerrors "github.com/projectcalico/calico/libcalico-go/lib/errors"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/capo-net/capo/pkg/journal"
	"github.com/capo-net/capo/pkg/selection"
	"github.com/capo-net/capo/pkg/wire"
)

type fakeReleaser struct{ released int }

func (f *fakeReleaser) Release(context.Context, *journal.Record) error { f.released++; return nil }

// A DEL journaled while the agent was away is replayed: reserve, then
// release; but an address Calico has meanwhile given to another pod is not
// reserved under the old pod's name.
func TestReplayNeverReservesAnAddressAnotherPodHolds(t *testing.T) {
	optedIn := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "n1", Annotations: map[string]string{selection.NodeAnnotation: selection.Enabled}}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "redis-3", Namespace: "db", Annotations: map[string]string{selection.PodAnnotation: selection.Enabled}}}
	j := journal.Dir{Root: t.TempDir()}
	req := wire.ReserveRequest{
		ContainerID: "c1", IfName: "eth0", Network: "k8s-pod-network", Pod: wire.PodRef{Namespace: "db", Name: "redis-3"},
		RecordedIPs: []string{"10.0.0.3", "10.0.0.4"},
	}
	if _, err := j.Write(&journal.Record{Request: req}); err != nil {
		t.Fatal(err)
	}
	ipam := &fakeIPAM{err: cerrors.ErrorResourceDoesNotExist{}, holders: map[string]string{
		"10.0.0.3": "k8s-pod-network.c1",    // still this sandbox's: the DEL kept it allocated
		"10.0.0.4": "k8s-pod-network.other", // freed by Calico's GC and given to another pod
	}}
	r, rel := &fakeReserver{}, &fakeReleaser{}
	cl := &fakeCluster{node: optedIn, pod: pod}
	d := &drainer{
		journal: j, ipam: ipam, decider: testDecider(cl, ipam, r, time.Now), release: rel,
		timeout: func() time.Duration { return time.Second }, interval: time.Minute, metrics: newMetrics(),
	}
	d.drain(context.Background())
	if len(r.got) != 1 || r.got[0].IP != "10.0.0.3" {
		t.Fatalf("reserved %+v, want only 10.0.0.3", r.got)
	}
	if pending, _ := j.Pending(); len(pending) != 0 || rel.released != 1 {
		t.Fatalf("journal %d left, released %d", len(pending), rel.released)
	}
}

// A returning pod's ADD replays that pod's own journaled teardown first,
// and only that pod's; the periodic pass then finds it gone and does not
// reserve or release it a second time.
func TestReplayPodReplaysOnlyThatPodsTeardownsOnce(t *testing.T) {
	optedIn := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "n1", Annotations: map[string]string{selection.NodeAnnotation: selection.Enabled}}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "redis-3", Namespace: "db", Annotations: map[string]string{selection.PodAnnotation: selection.Enabled}}}
	j := journal.Dir{Root: t.TempDir()}
	for _, w := range []struct{ id, name, ip string }{{"c1", "redis-3", "10.0.0.3"}, {"c2", "redis-4", "10.0.0.4"}} {
		req := wire.ReserveRequest{ContainerID: w.id, IfName: "eth0", Network: "k8s-pod-network", Pod: wire.PodRef{Namespace: "db", Name: w.name}, RecordedIPs: []string{w.ip}}
		if _, err := j.Write(&journal.Record{Request: req}); err != nil {
			t.Fatal(err)
		}
	}
	listed, _ := j.Pending() // what a periodic pass listed before the ADD came
	ipam := &fakeIPAM{err: cerrors.ErrorResourceDoesNotExist{}, holders: map[string]string{"10.0.0.3": "k8s-pod-network.c1", "10.0.0.4": "k8s-pod-network.c2"}}
	r, rel := &fakeReserver{}, &fakeReleaser{}
	d := &drainer{
		journal: j, ipam: ipam, decider: testDecider(&fakeCluster{node: optedIn, pod: pod}, ipam, r, time.Now), release: rel,
		timeout: func() time.Duration { return time.Second }, interval: time.Minute, metrics: newMetrics(),
	}
	d.replayPod(context.Background(), wire.PodRef{Namespace: "db", Name: "redis-3", UID: "new"})
	if pending, _ := j.Pending(); len(pending) != 1 || pending[0].Record.Request.Pod.Name != "redis-4" || rel.released != 1 {
		t.Fatalf("after redis-3's ADD: %d records left (want redis-4's only), %d released", len(pending), rel.released)
	}
	for _, e := range listed {
		d.replayOnce(context.Background(), e.Name, e.Record)
	}
	if pending, _ := j.Pending(); len(pending) != 0 || rel.released != 2 {
		t.Fatalf("after the pass: %d records left, %d released (want 2: redis-3's not again)", len(pending), rel.released)
	}
}

// A returning pod's ADD waits for a replay in progress no longer than its
// own deadline: the answer goes back in time, the record stays for later.
func TestReplayPodWaitsForItsTurnOnlyUntilItsDeadline(t *testing.T) {
	j := journal.Dir{Root: t.TempDir()}
	req := wire.ReserveRequest{ContainerID: "c1", IfName: "eth0", Network: "k8s-pod-network", Pod: wire.PodRef{Namespace: "db", Name: "redis-3"}}
	if _, err := j.Write(&journal.Record{Request: req}); err != nil {
		t.Fatal(err)
	}
	rel := &fakeReleaser{}
	d := &drainer{journal: j, release: rel, timeout: func() time.Duration { return time.Second }, metrics: newMetrics()}
	d.turnOnce.Do(func() { d.turn = make(chan struct{}, 1) })
	d.turn <- struct{}{} // a long replay holds the turn
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	d.replayPod(ctx, wire.PodRef{Namespace: "db", Name: "redis-3"})
	if took := time.Since(start); took > time.Second {
		t.Fatalf("replayPod waited %s for the turn, past its 100ms deadline", took)
	}
	if pending, _ := j.Pending(); len(pending) != 1 || rel.released != 0 {
		t.Fatalf("%d records left, %d released: want the record kept for the pass", len(pending), rel.released)
	}
}
