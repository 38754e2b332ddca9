package testbed

import (
	"testing"
	"time"
)

// Eventually polls cond until it holds, failing the test with what after d.
// Every wait in the end-to-end tests is one of these: no fixed sleeps where
// a condition can be asked.
func Eventually(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %s: %s", d, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
