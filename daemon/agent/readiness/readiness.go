// Package readiness is what capo-agent's /readyz and /livez say: whether
// the agent can reserve now (its last reservation write landed, Calico can
// be used, its loops run), a prober that proves it when no traffic does,
// and the store wrapper through which every write reports how it went.
package readiness

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sort"
	"strings"
	"sync"
	"time"

	cerrors "github.com/projectcalico/calico/libcalico-go/lib/errors"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/capo-net/capo/pkg/calico/gate"
)

// Why the agent is not ready: the values of capo_agent_not_ready's reason
// label, a fixed set.
const (
	reasonStarting    = "starting"     // no write has landed since start
	reasonForbidden   = "forbidden"    // the datastore refuses the agent's credentials (RBAC, token)
	reasonRefused     = "refused"      // the datastore refused the write (admission policy, webhook, validation, a full bucket)
	reasonUnreachable = "unreachable"  // the datastore cannot be reached
	reasonTimeout     = "timeout"      // the write did not finish in time
	reasonConflict    = "conflict"     // the write kept losing compare-and-swap races
	reasonError       = "error"        // any other failure of the write
	reasonLoopStopped = "loop-stopped" // one of the agent's loops ended while the agent runs
	reasonCalicoAPI   = "calico-api"   // a Calico type is not served in the API group in force, or this build cannot work in it
	reasonStopping    = "stopping"     // Run returned
)

var notReadyReasons = []string{reasonStarting, reasonForbidden, reasonRefused, reasonUnreachable, reasonTimeout, reasonConflict, reasonError, reasonLoopStopped, reasonCalicoAPI, reasonStopping}

// Readiness is what /readyz says: ready means the agent can reserve now.
// capo-controller covers a node only while its agent is not ready, so a
// Ready agent that cannot write would leave teardowns to Calico's GC.
// It turns not ready on any failed reservation write, and ready again
// only when a write lands (a real one or the prober's).
type Readiness struct {
	now     func() time.Time
	metrics *Metrics
	wake    chan struct{} // tells the prober a write failed
	gate    *gate.Gate    // Calico cannot be used while it is closed; nil: no gate (set before Run)

	mu      sync.Mutex
	serving bool      // caches synced and the socket open
	wrote   bool      // the last write landed
	reason  string    // why not ready, when not
	detail  string    // the failure, for /readyz and the log
	proven  time.Time // when a write last landed
	stopped []string  // loops that ended while the agent runs
	done    bool      // Run returned
	pingOut time.Time // start of a batcher round trip not answered yet: see live
	awaits  []await   // what must have happened since start before the agent is ready
}

// await is a condition of readiness at start: done closes once it holds.
type await struct {
	what string
	done <-chan struct{}
}

// Metrics are readiness' share of the agent's metrics.
type Metrics struct {
	CanReserve prometheus.Gauge     // capo_agent_can_reserve
	NotReady   *prometheus.GaugeVec // capo_agent_not_ready, by reason
}

// New is the agent's readiness at start: not ready until a write lands.
// m nil exports nothing.
func New(m *Metrics, now func() time.Time) *Readiness {
	r := &Readiness{now: now, metrics: m, wake: make(chan struct{}, 1), reason: reasonStarting, detail: "no reservation write has landed yet"}
	r.export()
	return r
}

// UseGate has readiness follow g: Calico cannot be used while it is closed.
// Called once, before the agent runs.
func (r *Readiness) UseGate(g *gate.Gate) { r.gate = g }

// landed records a write that reached the datastore and was accepted.
func (r *Readiness) landed() {
	r.mu.Lock()
	was := r.wrote
	r.wrote, r.proven = true, r.now()
	r.mu.Unlock()
	if !was {
		slog.Info("reservation writes land again: ready", "after", r.reasonNow())
	}
	r.export()
}

// failed records a write that did not land. A write the agent itself
// abandoned (it is stopping) says nothing about the datastore.
func (r *Readiness) failed(err error) {
	if err == nil || errors.Is(err, context.Canceled) {
		return
	}
	reason := classify(err)
	r.mu.Lock()
	was := r.wrote
	r.wrote, r.reason, r.detail = false, reason, err.Error()
	r.mu.Unlock()
	if was {
		slog.Error("a reservation write failed: not ready until one lands (capo-controller covers this node meanwhile)", "reason", reason, "err", err)
	}
	select {
	case r.wake <- struct{}{}:
	default:
	}
	r.export()
}

// LoopStopped marks one of the agent's loops as ended: a dead drain or
// batcher cannot reserve either.
func (r *Readiness) LoopStopped(name string) {
	r.mu.Lock()
	r.stopped = append(r.stopped, name)
	r.mu.Unlock()
	slog.Error("an agent loop ended while the agent runs: not ready", "loop", name)
	r.export()
}

// Await keeps the agent not ready (starting) until done is closed; what
// says what is awaited. Called before the agent runs.
func (r *Readiness) Await(what string, done <-chan struct{}) {
	r.mu.Lock()
	r.awaits = append(r.awaits, await{what: what, done: done})
	r.mu.Unlock()
	go func() {
		<-done
		r.export()
	}()
}

// awaited is the first condition of Await not yet met, or "".
func (r *Readiness) awaited() string {
	for _, a := range r.awaits {
		select {
		case <-a.done:
		default:
			return a.what
		}
	}
	return ""
}

// Serve is called once the socket is open.
func (r *Readiness) Serve() {
	r.mu.Lock()
	r.serving = true
	r.mu.Unlock()
	r.export()
}

// Stop is called when Run returns: nothing is served any more.
func (r *Readiness) Stop() {
	r.mu.Lock()
	r.done = true
	r.mu.Unlock()
	r.export()
}

// state says whether the agent is ready and, if not, why (a reason from
// notReadyReasons) and what failed.
func (r *Readiness) state() (ready bool, reason, detail string) {
	calico := r.gate.Err()
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case r.done:
		return false, reasonStopping, "the agent is stopping"
	case len(r.stopped) > 0:
		s := append([]string(nil), r.stopped...)
		sort.Strings(s)
		return false, reasonLoopStopped, "ended: " + strings.Join(s, ", ")
	case calico != nil && !isAPIProblem(calico): // the check could not be made
		return false, classify(calico), calico.Error()
	case calico != nil: // before !wrote: a write that lands in a group Calico does not read proves nothing
		return false, reasonCalicoAPI, calico.Error()
	case !r.wrote:
		return false, r.reason, r.detail
	case !r.serving:
		return false, reasonStarting, "caches not synced or socket not open"
	case r.awaited() != "":
		return false, reasonStarting, r.awaited()
	}
	return true, "", ""
}

// provenWithin says whether a write landed in the last d.
func (r *Readiness) provenWithin(d time.Duration) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.wrote && r.now().Sub(r.proven) < d
}

// Ready is /readyz's check: ok, or why not in one line.
func (r *Readiness) Ready() (bool, string) {
	ok, reason, detail := r.state()
	if ok {
		return true, "can reserve"
	}
	return false, fmt.Sprintf("cannot reserve (%s): %s", reason, detail)
}

func (r *Readiness) reasonNow() string {
	_, reason, _ := r.state()
	return reason
}

// export sets capo_agent_can_reserve and capo_agent_not_ready{reason}.
func (r *Readiness) export() {
	if r.metrics == nil {
		return
	}
	ok, reason, _ := r.state()
	can := 0.0
	if ok {
		can = 1
	}
	r.metrics.CanReserve.Set(can)
	for _, x := range notReadyReasons {
		v := 0.0
		if x == reason {
			v = 1
		}
		r.metrics.NotReady.WithLabelValues(x).Set(v)
	}
}

// classify maps a failed write to a bounded reason.
func classify(err error) string {
	var netErr net.Error
	switch {
	case errors.As(err, new(cerrors.ErrorConnectionUnauthorized)):
		return reasonForbidden
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &netErr) && netErr.Timeout():
		return reasonTimeout
	case errors.As(err, new(cerrors.ErrorResourceUpdateConflict)), errors.As(err, new(cerrors.ErrorResourceAlreadyExists)):
		return reasonConflict
	case errors.As(err, &netErr), errors.As(err, new(*net.OpError)), strings.Contains(err.Error(), "connection refused"):
		return reasonUnreachable
	case errors.As(err, new(cerrors.ErrorDatastoreError)), errors.As(err, new(cerrors.ErrorValidation)):
		return reasonRefused
	}
	return reasonError
}

// Poke has the prober check again after its short retry.
func (r *Readiness) Poke() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}
