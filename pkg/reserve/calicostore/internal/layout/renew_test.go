package layout

import (
	"testing"
	"time"

	"github.com/capo-net/capo/pkg/reserve"
)

// A teardown renews what holds its address for the same pod when it is a
// later teardown (another sandbox), or when what holds it is the hold the
// agent made while calico-node was replaced, before the pod was torn down:
// the reservation's time then counts from the teardown. A DEL repeated for
// one sandbox, an older one, or another pod's renews nothing.
func TestRenews(t *testing.T) {
	del := reserve.Entry{IP: "10.0.0.1", Namespace: "kafka", Pod: "broker-0", Reason: reserve.ReasonCNIDel, Sandbox: "aaaa", ReservedAt: at}
	hold := del
	hold.Reason = reserve.ReasonCNIRewrite
	later := func(e reserve.Entry, sandbox string) reserve.Entry {
		e.Reason, e.Sandbox, e.ReservedAt = reserve.ReasonCNIDel, sandbox, at.Add(10*time.Second)
		return e
	}
	other := later(del, "aaaa")
	other.Pod = "broker-1"
	for _, c := range []struct {
		name   string
		old, e reserve.Entry
		want   bool
	}{
		{"a later teardown from another sandbox", del, later(del, "bbbb"), true},
		{"the DEL repeated", del, later(del, "aaaa"), false},
		{"the held pod's teardown", hold, later(hold, "aaaa"), true},
		{"the held pod's teardown, its sandbox unknown", hold, later(hold, ""), true},
		{"another hold", hold, func() reserve.Entry { e := later(hold, "aaaa"); e.Reason = reserve.ReasonCNIRewrite; return e }(), false},
		{"a teardown older than the hold", hold, func() reserve.Entry { e := later(hold, "aaaa"); e.ReservedAt = at.Add(-time.Second); return e }(), false},
		{"another pod's", hold, other, false},
	} {
		if got := renews(c.old, c.e); got != c.want {
			t.Errorf("%s: renews %v, want %v", c.name, got, c.want)
		}
	}
}
