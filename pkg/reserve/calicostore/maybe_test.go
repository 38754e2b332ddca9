package calicostore_test

import (
	"context"
	"errors"
	"net/url"
	"testing"

	cerrors "github.com/projectcalico/calico/libcalico-go/lib/errors"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/capo-net/capo/pkg/reserve"
	"github.com/capo-net/capo/pkg/reserve/reservetest"
)

// A release whose write was applied but whose answer was lost (its
// context ended, its connection dropped, the API server failed in its
// midst) says which refs may be released; an answer that refuses the
// write, or a read that fails, does not.
func TestAReleaseWithoutAnAnswerSaysWhatMayHaveLanded(t *testing.T) {
	for name, c := range map[string]struct {
		err   error
		maybe bool
	}{
		"context canceled":  {&url.Error{Op: "Put", URL: "https://api/ipreservations/x", Err: context.Canceled}, true},
		"deadline":          {cerrors.ErrorDatastoreError{Err: context.DeadlineExceeded}, true},
		"connection lost":   {errors.New("http2: client connection lost"), true},
		"server timeout":    {apierrors.NewTimeoutError("request did not complete", 0), true},
		"internal error":    {apierrors.NewInternalError(errors.New("etcdserver: request timed out")), true},
		"throttled":         {apierrors.NewTooManyRequests("slow down", 1), false},
		"forbidden":         {cerrors.ErrorConnectionUnauthorized{Err: apierrors.NewForbidden(schema.GroupResource{Resource: "ipreservations"}, "x", errors.New("policy"))}, false},
		"invalid":           {apierrors.NewBadRequest("no"), false},
		"validation failed": {cerrors.ErrorValidation{}, false},
	} {
		t.Run(name, func(t *testing.T) {
			s := reservetest.NewStore(reserve.DefaultLimits)
			mustReserve(t, s, "n1", "10.0.0.1", "10.0.0.2")
			l, err := s.List(ctx)
			if err != nil {
				t.Fatal(err)
			}
			s.Objects.LoseAnswer = func(verb, _ string) error { return c.err }
			done, err := s.Release(ctx, []reserve.Ref{l.Entries[0].Ref()})
			s.Objects.LoseAnswer = nil
			var maybe *reserve.MaybeWritten
			switch {
			case err == nil || len(done) != 0:
				t.Fatalf("released %v, %v: want the lost answer's error", done, err)
			case errors.As(err, &maybe) != c.maybe:
				t.Fatalf("%v: may have been written %v, want %v", err, maybe != nil, c.maybe)
			case c.maybe && (len(maybe.Refs) != 1 || maybe.Refs[0].IP != "10.0.0.1" || !errors.Is(err, c.err)):
				t.Fatalf("%+v: want 10.0.0.1's ref and the write's error", maybe)
			}
			if after, _ := s.List(ctx); len(after.Entries) != 1 {
				t.Fatalf("held after %v", ips(after.Entries)) // the write landed
			}
		})
	}
	// Refused before it is sent: nothing in doubt.
	s := reservetest.NewStore(reserve.DefaultLimits)
	mustReserve(t, s, "n1", "10.0.0.1")
	l, _ := s.List(ctx)
	gone, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := s.Release(gone, []reserve.Ref{l.Entries[0].Ref()}); err == nil || errors.As(err, new(*reserve.MaybeWritten)) {
		t.Fatalf("a release whose context had ended: %v, want an error and no write in doubt", err)
	}
}
