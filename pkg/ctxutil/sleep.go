// Package ctxutil holds the one wait every loop in capo uses.
package ctxutil

import (
	"context"
	"time"
)

// Sleep waits for d, or less if ctx ends first; it reports whether the full
// wait happened (false: ctx is done).
func Sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
