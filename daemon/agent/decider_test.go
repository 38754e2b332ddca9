package agent

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	cerrors "github.com/projectcalico/calico/libcalico-go/lib/errors"
	cnet "github.com/projectcalico/calico/libcalico-go/lib/net"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/capo-net/capo/pkg/config"
	"github.com/capo-net/capo/pkg/reserve"
	"github.com/capo-net/capo/pkg/selection"
	"github.com/capo-net/capo/pkg/wire"
)

type fakeCluster struct {
	node      *metav1.PartialObjectMetadata
	ns        *metav1.PartialObjectMetadata
	pod       *corev1.Pod
	successor *corev1.Pod
}

func (f *fakeCluster) Node() *metav1.PartialObjectMetadata            { return f.node }
func (f *fakeCluster) Namespace(string) *metav1.PartialObjectMetadata { return f.ns }
func (f *fakeCluster) Pod(context.Context, wire.PodRef) *corev1.Pod   { return f.pod }
func (f *fakeCluster) Successor(context.Context, wire.PodRef) *corev1.Pod {
	return f.successor
}

type fakeIPAM struct {
	ips     []cnet.IP
	err     error
	holders map[string]string // address -> handle, for GetAssignmentAttributes
}

func (f *fakeIPAM) IPsByHandle(context.Context, string) ([]cnet.IP, error) { return f.ips, f.err }
func (f *fakeIPAM) GetAssignmentAttributes(_ context.Context, ip cnet.IP) (map[string]string, *string, error) {
	if h, ok := f.holders[ip.String()]; ok {
		return nil, &h, nil
	}
	return nil, nil, cerrors.ErrorResourceDoesNotExist{Identifier: ip.String()}
}

type fakeReserver struct {
	got []reserve.Entry
	err error
}

func (f *fakeReserver) Reserve(_ context.Context, es []reserve.Entry) (*reserve.Result, error) {
	f.got = append(f.got, es...)
	return &reserve.Result{}, f.err
}

func TestDecide(t *testing.T) {
	now := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	optedIn := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "n1", Annotations: map[string]string{selection.NodeAnnotation: selection.Enabled}}}
	enabledNS := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "kafka", Labels: map[string]string{selection.NamespaceLabel: selection.Enabled}}}
	yes := true
	broker := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
		Name: "broker-0", Namespace: "kafka", UID: "pod-uid",
		Labels:          map[string]string{"brokerId": "0"},
		OwnerReferences: []metav1.OwnerReference{{Kind: "StatefulSet", Name: "broker", UID: "sts-uid", Controller: &yes}},
	}}
	req := func(recorded ...string) *wire.ReserveRequest {
		return &wire.ReserveRequest{
			ContainerID: "c1", IfName: "eth0", Network: "k8s-pod-network",
			Pod: wire.PodRef{Namespace: "kafka", Name: "broker-0", UID: "pod-uid"}, RecordedIPs: recorded,
		}
	}
	cases := []struct {
		name     string
		cluster  *fakeCluster
		ipam     *fakeIPAM
		resErr   error
		req      *wire.ReserveRequest
		want     wire.Outcome
		wantErr  string
		reserved []string
	}{
		{name: "node not opted in", cluster: &fakeCluster{node: &metav1.PartialObjectMetadata{}, ns: enabledNS, pod: broker}, req: req("10.0.0.1"), want: wire.NodeNotOptedIn},
		{name: "recorded addresses reserved", cluster: &fakeCluster{node: optedIn, ns: enabledNS, pod: broker}, req: req("10.0.0.1", "fd00::1"), want: wire.Reserved, reserved: []string{"10.0.0.1", "fd00::1"}},
		{name: "handle read when nothing recorded", cluster: &fakeCluster{node: optedIn, ns: enabledNS, pod: broker}, ipam: &fakeIPAM{ips: []cnet.IP{cnet.MustParseIP("10.0.0.7")}}, req: req(), want: wire.Reserved, reserved: []string{"10.0.0.7"}},
		{name: "handle gone: nothing to reserve", cluster: &fakeCluster{node: optedIn, ns: enabledNS, pod: broker}, ipam: &fakeIPAM{err: cerrors.ErrorResourceDoesNotExist{}}, req: req(), want: wire.NothingToReserve},
		{name: "handle unreadable: no answer", cluster: &fakeCluster{node: optedIn, ns: enabledNS, pod: broker}, ipam: &fakeIPAM{err: errors.New("connection refused")}, req: req(), wantErr: "reading Calico handle"},
		{name: "unknown pod reserved", cluster: &fakeCluster{node: optedIn, ns: enabledNS}, req: req("10.0.0.2"), want: wire.Reserved, reserved: []string{"10.0.0.2"}},
		{name: "unknown pod, not selected when it started", cluster: &fakeCluster{node: optedIn, ns: enabledNS}, req: withAtAdd(req("10.0.0.2"), false), want: wire.NotSelected},
		{name: "unknown pod, selected when it started", cluster: &fakeCluster{node: optedIn, ns: enabledNS}, req: withAtAdd(req("10.0.0.2"), true), want: wire.Reserved, reserved: []string{"10.0.0.2"}},
		{name: "known pod: its labels now win over the ADD's decision", cluster: &fakeCluster{node: optedIn, ns: enabledNS, pod: broker}, req: withAtAdd(req("10.0.0.4"), false), want: wire.Reserved, reserved: []string{"10.0.0.4"}},
		{name: "node opted out since: the ADD's decision does not matter", cluster: &fakeCluster{node: &metav1.PartialObjectMetadata{}, ns: enabledNS}, req: withAtAdd(req("10.0.0.2"), true), want: wire.NodeNotOptedIn},
		{name: "write fails: no answer", cluster: &fakeCluster{node: optedIn, ns: enabledNS, pod: broker}, resErr: errors.New("conflict storm"), req: req("10.0.0.3"), wantErr: "conflict storm"},
		{name: "odd spellings reserved as one", cluster: &fakeCluster{node: optedIn, ns: enabledNS, pod: broker}, req: req("FD00:0::1", "::ffff:10.0.0.9"), want: wire.Reserved, reserved: []string{"fd00::1", "10.0.0.9"}},
		{name: "garbage recorded address", cluster: &fakeCluster{node: optedIn, ns: enabledNS, pod: broker}, req: req("not-an-ip"), wantErr: "not an IP"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.ipam == nil {
				tc.ipam = &fakeIPAM{err: errors.New("must not be read")}
			}
			r := &fakeReserver{err: tc.resErr}
			a := testDecider(tc.cluster, tc.ipam, r, func() time.Time { return now })
			resp, err := a.Decide(context.Background(), tc.req)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || resp.Outcome != tc.want {
				t.Fatalf("got %+v, %v; want %s", resp, err, tc.want)
			}
			var got []string
			for _, e := range r.got {
				got = append(got, e.IP)
				if e.Reason != reserve.ReasonCNIDel || !e.ReservedAt.Equal(now) || e.Namespace != "kafka" || e.Pod != "broker-0" || e.PodUID != "pod-uid" {
					t.Fatalf("entry %+v", e)
				}
				if tc.cluster.pod != nil && (e.OwnerKind != "StatefulSet" || e.OwnerUID != "sts-uid") {
					t.Fatalf("owner missing: %+v", e)
				}
			}
			if strings.Join(got, ",") != strings.Join(tc.reserved, ",") {
				t.Fatalf("reserved %v, want %v", got, tc.reserved)
			}
		})
	}
}

// testDecider decides with the default config's selectors.
func testDecider(c Cluster, ipam IPAM, r Reserver, now func() time.Time) *decider {
	cfg := config.Default()
	return &decider{
		cluster: c, ipam: ipam, reserve: r, selectors: func() []selection.Selector { return cfg.Selectors },
		observe: func(time.Duration) {}, now: now,
	}
}

func withAtAdd(r *wire.ReserveRequest, selected bool) *wire.ReserveRequest {
	r.AtAdd = &wire.Decision{Selected: selected, Rule: "recorded at ADD"}
	return r
}

// A teardown an operator released by hand (the store refuses it: a
// journal replayed, a sweep) is not reserved again: its DEL releases the
// address as asked, and what else it reserved stays held and is told.
func TestDecideReleasedByHand(t *testing.T) {
	optedIn := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{selection.NodeAnnotation: selection.Enabled}}}
	c := &fakeCluster{node: optedIn, ns: &metav1.PartialObjectMetadata{}}
	req := &wire.ReserveRequest{ContainerID: "c1", Network: "k8s-pod-network", Pod: wire.PodRef{Namespace: "db", Name: "db-0", UID: "u"}, RecordedIPs: []string{"10.0.0.1", "fd00::1"}}
	for _, tc := range []struct {
		refused []string
		want    wire.Outcome
		told    int
	}{
		{[]string{"10.0.0.1", "fd00::1"}, wire.NothingToReserve, 0},
		{[]string{"10.0.0.1"}, wire.Reserved, 1},
	} {
		var told []reserve.Entry
		d := testDecider(c, &fakeIPAM{}, refusing(tc.refused), time.Now)
		d.reserved = func(es []reserve.Entry) { told = append(told, es...) }
		resp, err := d.Decide(context.Background(), req)
		if err != nil || resp.Outcome != tc.want || len(told) != tc.told || len(resp.IPs) != tc.told {
			t.Fatalf("refused %v: %+v, %v, told %v; want %s", tc.refused, resp, err, told, tc.want)
		}
	}
}

type refusing []string

func (r refusing) Reserve(_ context.Context, es []reserve.Entry) (*reserve.Result, error) {
	res := &reserve.Result{Refused: r}
	for _, e := range es {
		if !slices.Contains(r, e.IP) {
			res.Added = append(res.Added, e.IP)
		}
	}
	return res, nil
}
