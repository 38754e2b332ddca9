// Package pause waits a while unless a context ends first: the loops of
// capo's daemons, and capo-ipam's wait for its agent. It imports nothing
// beyond the standard library, so capo-ipam pays nothing to start for it.
package pause

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
