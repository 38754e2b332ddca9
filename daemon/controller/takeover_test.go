package controller

import (
	"fmt"
	"testing"
	"time"

	"github.com/capo-net/capo/pkg/reserve"
)

func TestRememberedLostPodsWindow(t *testing.T) {
	now := time.Unix(1010, 0) // the takeover
	// The window: lease 15 s + renew deadline 10 s + 5 retries of 2 s = 35 s.
	c := &takeover{deps: &deps{opts: Options{LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second}, metrics: newMetrics(), now: func() time.Time { return now }}}
	at := func(sec int64, pod string) lostPod { return lostPod{seen: time.Unix(sec, 0), pod: pod} }
	c.remember(at(900, "old")) // pruned by the next remember
	c.remember(at(970, "before-window"))
	c.remember(at(995, "in-window"))
	c.remember(at(999, "just-now"))
	if len(c.missed) != 3 {
		t.Fatalf("remembered %d, want 3 (the oldest pruned)", len(c.missed))
	}
	got := c.takeMissed()
	if len(got) != 2 || got[0].pod != "in-window" || got[1].pod != "just-now" {
		t.Fatalf("handed over %+v", got)
	}
	if again := c.takeMissed(); len(again) != 0 {
		t.Fatalf("handed over twice: %+v", again)
	}
	for i := range maxRemembered + 5 {
		c.remember(at(999, fmt.Sprint(i)))
	}
	if len(c.missed) != maxRemembered || c.missed[len(c.missed)-1].pod != fmt.Sprint(maxRemembered+4) {
		t.Fatalf("bound not kept: %d", len(c.missed))
	}
}

func TestRememberedLostPodKeepsTheLatestReason(t *testing.T) {
	now := time.Unix(1010, 0)
	c := &takeover{deps: &deps{opts: Options{LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second}, metrics: newMetrics(), now: func() time.Time { return now }}}
	lp := func(sec int64, pod, reason string) lostPod {
		return lostPod{seen: time.Unix(sec, 0), pod: pod, entries: []reserve.Entry{{IP: "10.0.0.1", Reason: reason}}}
	}
	c.remember(lp(1000, "ns/redis-0", ReasonAgentAway))
	c.remember(lp(1001, "ns/web-0", ReasonAgentAway))
	c.remember(lp(1005, "ns/redis-0", reserve.ReasonNodeLost))
	got := c.takeMissed()
	if len(got) != 2 || got[0].pod != "ns/web-0" || got[1].pod != "ns/redis-0" || got[1].entries[0].Reason != reserve.ReasonNodeLost {
		t.Fatalf("handed over %+v, want web-0 then redis-0 as node-lost", got)
	}
}
