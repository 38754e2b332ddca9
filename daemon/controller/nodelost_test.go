package controller

import (
	"fmt"
	"testing"
	"time"
)

func TestRememberedLostPodsWindow(t *testing.T) {
	now := time.Unix(1010, 0) // the takeover
	// The window: lease 15 s + renew deadline 10 s + 5 retries of 2 s = 35 s.
	c := &Controller{opts: Options{LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second}, metrics: newMetrics(), now: func() time.Time { return now }}
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
