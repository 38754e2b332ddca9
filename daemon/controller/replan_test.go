package controller

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/capo-net/capo/pkg/reserve"
	"github.com/capo-net/capo/pkg/reserve/calicostore"
)

// The pass plans 10.0.0.1's release (its TTL is over); before it writes,
// the pod is torn down again from another sandbox and its agent renews the
// reservation. The pass's write conflicts and is made again on a fresh
// read: the renewed reservation must survive, counted as no release, and
// be judged by its own age from the next pass on.
func TestPassKeepsAnEntryReplacedBeforeItsWrite(t *testing.T) {
	b := newPassBed(t)
	planned := held("10.0.0.1", "kafka", "broker-0", 2*time.Hour)
	planned.Sandbox = "aaaa"
	b.reserve("n1", planned, held("10.0.0.2", "kafka", "broker-1", time.Minute))
	renewed := planned
	renewed.Sandbox, renewed.ReservedAt, renewed.Seen = "bbbb", now, time.Time{}
	agent := b.store.Clone(reserve.DefaultLimits)
	head := calicostore.BucketName(calicostore.BucketOf("n1"), 0)
	done := false
	b.store.Objects.Before = func(verb, name string) error {
		if verb == "update" && name == head && !done {
			done = true
			if _, err := agent.Reserve(context.Background(), "n1", []reserve.Entry{renewed}); err != nil {
				t.Error(err)
			}
		}
		return nil
	}
	b.pass()
	b.store.Objects.Before = nil
	got := b.held()["10.0.0.1"]
	if got.Sandbox != "bbbb" || !got.ReservedAt.Equal(now) {
		t.Fatalf("10.0.0.1 after the pass: %+v; the reservation renewed before the write was released", got)
	}
	if n := testutil.ToFloat64(b.c.metrics.releases.WithLabelValues("ttl")); n != 0 {
		t.Errorf("ttl releases %v: nothing the plan named was released", n)
	}
	if ev := b.eventReasons(); len(ev) != 0 {
		t.Errorf("events %v", ev)
	}
	b.pass()
	if got := b.held()["10.0.0.1"]; got.Sandbox != "bbbb" || !got.Seen.Equal(now) {
		t.Fatalf("the next pass: %+v; want it kept and stamped, an hour of TTL ahead", got)
	}
}

// A release whose write lands but whose answer is lost (the soak's
// `context canceled` as a new leader took over) is said: a warning naming
// the entry and its reason, and a count; the next pass finds it gone and
// releases nothing again.
func TestAReleaseInDoubtIsSaid(t *testing.T) {
	b := newPassBed(t)
	e := held("10.0.0.1", "kafka", "broker-0", 2*time.Hour)
	e.Node, e.Sandbox = "n1", "aaaa"
	b.reserve("n1", e)
	var logged bytes.Buffer
	defer slog.SetDefault(slog.Default())
	slog.SetDefault(slog.New(slog.NewJSONHandler(&logged, nil)))
	b.store.Objects.LoseAnswer = func(verb, _ string) error {
		if verb == "update" {
			return &url.Error{Op: "Put", URL: "https://api/ipreservations", Err: context.Canceled}
		}
		return nil
	}
	if err := b.c.pass(context.Background()); err == nil {
		t.Fatal("the pass whose write lost its answer reported no error")
	}
	b.store.Objects.LoseAnswer = nil
	var line struct{ Msg, IP, Node, Pod, Sandbox, Reason string }
	for _, l := range strings.Split(logged.String(), "\n") {
		if strings.Contains(l, MaybeReleased) {
			_ = json.Unmarshal([]byte(l), &line)
		}
	}
	if line.IP != "10.0.0.1" || line.Node != "n1" || line.Pod != "kafka/broker-0" || line.Sandbox != "aaaa" || line.Reason != "ttl" {
		t.Fatalf("logged %+v, want a warning naming 10.0.0.1's entry and its reason:\n%s", line, logged.String())
	}
	if n := testutil.ToFloat64(b.c.metrics.releasesInDoubt.WithLabelValues("ttl")); n != 1 {
		t.Errorf("ttl releases in doubt %v", n)
	}
	b.pass()
	if got := b.held(); len(got) != 0 {
		t.Fatalf("held %v: the write had landed", got)
	}
	if n := testutil.ToFloat64(b.c.metrics.releases.WithLabelValues("ttl")); n != 0 {
		t.Errorf("ttl releases %v: the next pass found nothing to release", n)
	}
}
