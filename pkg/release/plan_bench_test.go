package release

import (
	"fmt"
	"testing"
	"time"

	"github.com/capo-net/capo/pkg/reserve"
)

// BenchmarkPlan10k plans over 10 000 reservations on 1 000 nodes, owned by
// 2 000 StatefulSets in 500 namespaces, with about a tenth due.
func BenchmarkPlan10k(b *testing.B) {
	w := World{Namespaces: map[string]bool{}, Owners: map[OwnerKey]Owner{}, TrackedKinds: map[string]bool{"StatefulSet": true, "ReplicaSet": true}}
	for i := range 500 {
		w.Namespaces[fmt.Sprintf("ns-%d", i)] = true
	}
	for i := range 2000 {
		w.Owners[OwnerKey{"StatefulSet", fmt.Sprintf("ns-%d", i%500), fmt.Sprintf("set-%d", i)}] = Owner{UID: fmt.Sprintf("uid-%d", i), StatefulSet: true, Replicas: 5}
	}
	entries := make([]reserve.Entry, 0, 10000)
	for i := range 10000 {
		set := i % 2000
		entries = append(entries, reserve.Entry{
			IP: fmt.Sprintf("10.%d.%d.%d", i/65536, i/256%256, i%256), Node: fmt.Sprintf("node-%d", i%1000),
			Namespace: fmt.Sprintf("ns-%d", set%500), Pod: fmt.Sprintf("set-%d-%d", set, i%6), Reason: reserve.ReasonCNIDel,
			ReservedAt: t0.Add(-time.Duration(i%450) * 6 * time.Second), OwnerKind: "StatefulSet", OwnerName: fmt.Sprintf("set-%d", set), OwnerUID: fmt.Sprintf("uid-%d", set),
		})
	}
	l := Limits{TTL: 40 * time.Minute, MaxCount: 9000}
	b.ReportAllocs()
	b.ResetTimer()
	var n int
	for i := 0; i < b.N; i++ {
		n = len(Plan(entries, t0, l, w))
	}
	b.ReportMetric(float64(n), "releases")
}
