package nodebed

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// PollInterval is how often Poll and Eventually look again.
const PollInterval = 100 * time.Millisecond

// Poll calls cond until it returns nil, limit passes, or ctx ends; the
// error then carries cond's last answer, which says what was still wrong.
func Poll(ctx context.Context, limit time.Duration, cond func() error) error {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	t := time.NewTicker(PollInterval)
	defer t.Stop()
	for {
		err := cond()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("after %s: %w", limit, err)
		case <-t.C:
		}
	}
}

// Eventually is Poll for tests: it fails the test naming what was awaited
// and why it was not reached.
func Eventually(t testing.TB, limit time.Duration, what string, cond func() error) {
	t.Helper()
	if err := Poll(context.Background(), limit, cond); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

// Consistently checks cond for the whole of d and fails at the first
// error: for the promises that must hold over time ("the address stays
// held"), where one look would prove nothing.
func Consistently(t testing.TB, d time.Duration, what string, cond func() error) {
	t.Helper()
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		if err := cond(); err != nil {
			t.Fatalf("%s stopped holding: %v", what, err)
		}
		time.Sleep(PollInterval)
	}
}
