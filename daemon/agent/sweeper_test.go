package agent

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	cerrors "github.com/projectcalico/calico/libcalico-go/lib/errors"
	cnet "github.com/projectcalico/calico/libcalico-go/lib/net"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/capo-net/capo/pkg/journal"
	"github.com/capo-net/capo/pkg/selection"
	"github.com/capo-net/capo/pkg/wire"
)

func TestSweepSettlesTeardownsThatWentAroundCapo(t *testing.T) {
	optedIn := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "n1", Annotations: map[string]string{selection.NodeAnnotation: selection.Enabled}}}
	enabledNS := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "kafka", Labels: map[string]string{selection.NamespaceLabel: selection.Enabled}}}
	broker := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "broker-0", Namespace: "kafka", UID: "u0", Labels: map[string]string{"brokerId": "0"}},
		Spec:       corev1.PodSpec{NodeName: "n1"}, Status: corev1.PodStatus{Phase: corev1.PodFailed},
	}
	gone := cerrors.ErrorResourceDoesNotExist{}
	cases := []struct {
		name      string
		pod       *corev1.Pod
		ipam      *fakeIPAM
		journaled bool
		atAdd     *wire.Decision // in the ADD record
		reserved  string         // addresses reserved, comma-separated
		kept      bool           // the record stays
		bypassed  float64
	}{
		{name: "handle still allocated: DEL not come yet", pod: broker, ipam: &fakeIPAM{ips: []cnet.IP{cnet.MustParseIP("10.0.0.1")}}, kept: true},
		{name: "released behind capo's back: reserved", pod: broker, ipam: &fakeIPAM{err: gone}, reserved: "10.0.0.1,fd00::1", bypassed: 1},
		{name: "one address already reused", pod: broker, ipam: &fakeIPAM{err: gone, holders: map[string]string{"10.0.0.1": "k8s-pod-network.other"}}, reserved: "fd00::1", bypassed: 1},
		{name: "pod unknown, nothing known at ADD: reserved to be safe, as the DEL would", ipam: &fakeIPAM{err: gone}, reserved: "10.0.0.1,fd00::1", bypassed: 1},
		{name: "pod unknown, selected at ADD: reserved", ipam: &fakeIPAM{err: gone}, atAdd: &wire.Decision{Selected: true, Rule: "r"}, reserved: "10.0.0.1,fd00::1", bypassed: 1},
		{name: "pod unknown, not selected at ADD: record cleared, nothing held", ipam: &fakeIPAM{err: gone}, atAdd: &wire.Decision{Rule: "r"}},
		{name: "journaled DEL keeps its address on purpose", pod: broker, ipam: &fakeIPAM{err: gone}, journaled: true, kept: true},
		{name: "handle unreadable: next sweep", pod: broker, ipam: &fakeIPAM{err: errors.New("connection refused")}, kept: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			j := journal.Dir{Root: t.TempDir()}
			rec := &journal.AddrRecord{
				Network: "k8s-pod-network", ContainerID: "c1", IfName: "eth0",
				Pod: wire.PodRef{Namespace: "kafka", Name: "broker-0", UID: "u0"}, IPs: []string{"10.0.0.1", "fd00::1"}, AtAdd: tc.atAdd,
			}
			if err := j.RecordAddrs(rec); err != nil {
				t.Fatal(err)
			}
			if tc.journaled {
				if _, err := j.Write(&journal.Record{Request: wire.ReserveRequest{ContainerID: "c1", IfName: "eth0", Network: "k8s-pod-network"}}); err != nil {
					t.Fatal(err)
				}
			}
			r := &fakeReserver{}
			a := testSweeper(&fakeCluster{node: optedIn, ns: enabledNS, pod: tc.pod}, tc.ipam, r, j)
			a.sweepAddrs(context.Background(), false)
			var got []string
			for _, e := range r.got {
				got = append(got, e.IP)
			}
			if strings.Join(got, ",") != tc.reserved {
				t.Fatalf("reserved %v, want %q", got, tc.reserved)
			}
			if kept := j.Addrs("k8s-pod-network", "c1", "eth0") != nil; kept != tc.kept {
				t.Fatalf("record kept = %v, want %v", kept, tc.kept)
			}
			if n := testutil.ToFloat64(a.metrics.bypassed); n != tc.bypassed {
				t.Fatalf("bypassed = %v, want %v", n, tc.bypassed)
			}
		})
	}
}

// A pod still running here is skipped by the periodic sweep: no handle read.
func TestPeriodicSweepSkipsRunningPods(t *testing.T) {
	j := journal.Dir{Root: t.TempDir()}
	if err := j.RecordAddrs(&journal.AddrRecord{Network: "net", ContainerID: "c1", IfName: "eth0", Pod: wire.PodRef{Namespace: "kafka", Name: "broker-0", UID: "u0"}, IPs: []string{"10.0.0.1"}}); err != nil {
		t.Fatal(err)
	}
	running := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "broker-0", Namespace: "kafka", UID: "u0"}, Spec: corev1.PodSpec{NodeName: "n1"}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	a := testSweeper(&fakeCluster{node: &metav1.PartialObjectMetadata{}, pod: running}, &fakeIPAM{err: errors.New("must not be read")}, &fakeReserver{}, j)
	a.sweepAddrs(context.Background(), false)
	if j.Addrs("net", "c1", "eth0") == nil {
		t.Fatal("a running pod's record was removed")
	}
}

// testSweeper sweeps node n1's records without pauses.
func testSweeper(c Cluster, ipam IPAM, r Reserver, j journal.Dir) *sweeper {
	return &sweeper{
		node: "n1", cluster: c, ipam: ipam, journal: j, decider: testDecider(c, ipam, r, time.Now),
		timeout: func() time.Duration { return time.Second }, interval: time.Minute, metrics: newMetrics(),
	}
}

// landingIPAM holds the handle's addresses until landed: a DEL through
// the rewritten conflist releasing them with plain calico-ipam.
type landingIPAM struct {
	fakeIPAM
	landed atomic.Bool
}

func (l *landingIPAM) IPsByHandle(ctx context.Context, h string) ([]cnet.IP, error) {
	if l.landed.Load() {
		return nil, cerrors.ErrorResourceDoesNotExist{Identifier: h}
	}
	return []cnet.IP{cnet.MustParseIP("10.0.0.1")}, nil
}

// A DEL that read the rewritten conflist just before capo was re-applied
// releases its address a moment after the re-apply's sweep: the sweep
// looks again a second later, not only after ten, so the address is
// reserved after the fact within about a second.
func TestTheSweepAfterAReapplyLooksAgainSoon(t *testing.T) {
	optedIn := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "n1", Annotations: map[string]string{selection.NodeAnnotation: selection.Enabled}}}
	j := journal.Dir{Root: t.TempDir()}
	if err := j.RecordAddrs(&journal.AddrRecord{Network: "k8s-pod-network", ContainerID: "c1", IfName: "eth0", Pod: wire.PodRef{Namespace: "kafka", Name: "broker-0", UID: "u0"}, IPs: []string{"10.0.0.1"}}); err != nil {
		t.Fatal(err)
	}
	ipam, r := &landingIPAM{}, &fakeReserver{}
	sw := testSweeper(&fakeCluster{node: optedIn}, ipam, r, j)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	reapplied := make(chan struct{}, 1)
	done := make(chan struct{})
	go func() { sw.run(ctx, reapplied); close(done) }()
	reapplied <- struct{}{}
	time.Sleep(300 * time.Millisecond) // the re-apply's own sweep found it allocated
	ipam.landed.Store(true)
	deadline := time.Now().Add(2 * time.Second)
	for j.Addrs("k8s-pod-network", "c1", "eth0") != nil {
		if time.Now().After(deadline) {
			t.Fatal("the teardown that went around capo-ipam was not found within 2s of the re-apply")
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	<-done
	if len(r.got) != 1 || r.got[0].IP != "10.0.0.1" {
		t.Fatalf("reserved %+v, want 10.0.0.1 after the fact", r.got)
	}
}
