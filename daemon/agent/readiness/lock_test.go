package readiness

import (
	"context"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes/fake"

	"github.com/capo-net/capo/pkg/calico/apigroup"
	"github.com/capo-net/capo/pkg/calico/apigroup/apigrouptest"
	"github.com/capo-net/capo/pkg/calico/gate"
	"github.com/capo-net/capo/pkg/reserve"
	"github.com/capo-net/capo/pkg/reserve/reservetest"
)

// Calico locks its datastore (ClusterInformation datastoreReady false)
// before it migrates it: the agent turns not ready, naming the lock, and
// writes nothing until Calico unlocks it; a landed probe write does not
// make it ready meanwhile.
func TestAgentWritesNothingWhileCalicoIsLocked(t *testing.T) {
	kube := fake.NewClientset()
	apigrouptest.ServeV1(t, kube)
	ready := true
	r := New(nil, time.Now)
	m, _ := apigroup.InForce()
	l := gate.NewLock(m, nil, func(context.Context) (*bool, error) { return &ready, nil }, r.Poke)
	g := NewGate(kube.Discovery(), nil, l)
	r.gate = g
	p := &Prober{objs: reservetest.NewObjects(), r: r, every: probeEvery, retry: probeRetry, timeout: probeEvery, gate: g}
	p.once(context.Background())
	r.Serve()
	if ok, reason, detail := r.state(); !ok {
		t.Fatalf("not ready with Calico unlocked: %s %s", reason, detail)
	}

	ready = false
	p.once(context.Background())
	ok, reason, detail := r.state()
	if ok || reason != reasonCalicoAPI || !strings.Contains(detail, "is locked") {
		t.Fatalf("state with Calico locked: %v %q %q", ok, reason, detail)
	}
	select {
	case <-r.wake: // the change asked the prober to look again at once
	default:
		t.Fatal("the lock's change did not wake the prober")
	}
	r.landed()
	if ok, _, _ := r.state(); ok {
		t.Fatal("a landed write made the agent ready while Calico is locked")
	}
	s := g.Store(watchedStore{Store: nil, r: r})
	if _, err := s.Reserve(context.Background(), "n1", []reserve.Entry{{}}); err == nil || !strings.Contains(err.Error(), "is locked") {
		t.Fatalf("a reservation was let through while Calico is locked: %v", err)
	}

	ready = true
	p.once(context.Background())
	if ok, reason, detail := r.state(); !ok {
		t.Fatalf("still not ready once Calico unlocked: %s %s", reason, detail)
	}
}
