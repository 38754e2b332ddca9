package readiness

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// stuckAfter is how long a round trip through the batcher may stay
// unanswered before /livez fails: well past any datastore write's
// timeout, since a slow datastore is for readiness, not for a restart.
const stuckAfter = 90 * time.Second

// pingSent records a round trip through the batcher, started now; an
// older one still unanswered keeps its start.
func (r *Readiness) pingSent() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.pingOut.IsZero() {
		r.pingOut = r.now()
	}
}

// pingAnswered records that the batcher answered, whatever it said.
func (r *Readiness) pingAnswered() {
	r.mu.Lock()
	r.pingOut = time.Time{}
	r.mu.Unlock()
}

// Live is /livez's check: it fails only where a restart helps, a loop
// that ended or a batcher that stopped answering. A datastore that
// refuses or cannot be reached is not-ready, never not-live.
func (r *Readiness) Live() (bool, string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.stopped) > 0 {
		s := append([]string(nil), r.stopped...)
		sort.Strings(s)
		return false, "agent loops ended: " + strings.Join(s, ", ")
	}
	if !r.pingOut.IsZero() {
		if d := r.now().Sub(r.pingOut); d > stuckAfter {
			return false, fmt.Sprintf("the reservation batcher has not answered for %s", d.Round(time.Second))
		}
	}
	return true, "alive"
}
