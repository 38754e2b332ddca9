package agent

import (
	"context"
	"time"
)

// sleep waits for d, or less if ctx ends first; it reports whether the full
// wait happened (false: ctx is done). Every loop of the agent waits this way.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
