// Package failpoint fails capo on purpose at named places in its critical
// sections, for the robustness suite (test/robust): the environment
// variable CAPO_FAILPOINTS, read once as the process starts, arms points
// and says what each does. Unarmed, a point costs one atomic load. It
// imports only the standard library, so capo-ipam pays nothing for it.
package failpoint

import (
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// EnvVar arms points: "point=action;point=action". An action is
// [P%][N*]kind: kind is panic, exit, sleep(duration) or error; P% fires on
// that share of the hits, N* on the first N only (counted per process).
// Examples: "agent/reserved=10%exit", "plugin/journal-write=2*error",
// "agent/offer=50%sleep(3s)".
const EnvVar = "CAPO_FAILPOINTS"

// ExitCode is the status of a process an exit action ends, as a crash
// would end it: no deferred work runs.
const ExitCode = 86

// The points. Each says where it is; those that can also fail (error)
// are marked so.
const (
	// AgentReserved: a teardown's reservation is written, capo-ipam not yet
	// answered (it releases through the delegate only once answered). Can fail.
	AgentReserved = "agent/reserved"
	// AgentNothingToReserve: the agent answers capo-ipam "nothing to
	// reserve" for a sandbox whose addresses it found, so that capo-ipam
	// releases them unreserved. A deliberate bug, for proving the suite's
	// checker: it is never armed outside that proof. Can fail (error).
	AgentNothingToReserve = "agent/nothing-to-reserve"
	// AgentReplay: a journaled DEL's reservation is written, its release
	// through the delegate not yet run.
	AgentReplay = "agent/replay"
	// AgentOffer: a returning pod's offer is checked, not yet remembered
	// or answered.
	AgentOffer = "agent/offer"
	// AgentSettle: a return is confirmed, its reservations not yet ended.
	AgentSettle = "agent/settle"
	// ControllerReleasePass: a pass's releases are written; the requests
	// by hand it answered are not yet cleared, new entries not yet stamped.
	ControllerReleasePass = "controller/release-pass"
	// PluginBeforeRelease: capo-ipam has the agent's answer to a DEL and
	// has not yet run the delegate's release.
	PluginBeforeRelease = "plugin/before-release"
	// PluginJournalWrite: capo-ipam has written a DEL to the journal and
	// not yet reported success. Can fail: the DEL then fails, for the
	// runtime to retry, with the record written.
	PluginJournalWrite = "plugin/journal-write"
)

// points are the known points, each with whether it can fail (error).
var points = map[string]bool{
	AgentReserved: true, AgentNothingToReserve: true, AgentReplay: false, AgentOffer: false,
	AgentSettle: false, ControllerReleasePass: false, PluginBeforeRelease: false, PluginJournalWrite: true,
}

// Points lists the known points, sorted.
func Points() []string {
	out := make([]string, 0, len(points))
	for p := range points {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

// Error is what an error action makes a point return.
type Error struct{ Point string }

func (e *Error) Error() string { return "capo failpoint " + e.Point + " fired" }

// on says whether any point is armed: the one load an unarmed point costs.
var (
	on    atomic.Bool
	armed atomic.Pointer[map[string]*action]
)

func init() {
	if err := Arm(os.Getenv(EnvVar)); err != nil {
		// Only a test sets it: a typo must stop the run, not pass unarmed.
		fmt.Fprintf(os.Stderr, "capo: %s: %v\n", EnvVar, err)
		os.Exit(2)
	}
}

// Arm replaces the armed points with spec (EnvVar's form); "" disarms
// every point. On error nothing changes.
func Arm(spec string) error {
	if strings.TrimSpace(spec) == "" {
		on.Store(false)
		armed.Store(nil)
		return nil
	}
	t := map[string]*action{}
	for _, term := range strings.Split(spec, ";") {
		if strings.TrimSpace(term) == "" {
			continue
		}
		name, act, ok := strings.Cut(strings.TrimSpace(term), "=")
		if !ok {
			return fmt.Errorf("%q: want point=action, e.g. %s=10%%exit", term, AgentReserved)
		}
		canFail, known := points[name]
		if !known {
			return fmt.Errorf("%q is no failpoint; known: %s", name, strings.Join(Points(), ", "))
		}
		a, err := parseAction(act)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		if a.kind == kindError && !canFail {
			return fmt.Errorf("%s cannot fail with an error; use panic, exit or sleep", name)
		}
		t[name] = a
	}
	armed.Store(&t)
	on.Store(true)
	return nil
}

// Hit fires the point if it is armed: it may panic, exit or sleep.
// Unarmed, it inlines to one atomic load.
func Hit(name string) {
	if on.Load() {
		_ = fireArmed(name)
	}
}

// Or is err, or, when err is nil and the point is armed, what it does:
// an error action's *Error (or a panic, an exit, a sleep and nil).
func Or(name string, err error) error {
	if err != nil || !on.Load() {
		return err
	}
	return fireArmed(name)
}

// Clear sets *v to its zero value when the point fires with an error
// action: what was found is dropped.
func Clear[T any](name string, v *T) {
	if on.Load() && fireArmed(name) != nil {
		var zero T
		*v = zero
	}
}

// fireArmed fires the point in the armed table, if it is in it.
func fireArmed(name string) error {
	t := armed.Load()
	if t == nil {
		return nil
	}
	return fire(*t, name)
}

func fire(t map[string]*action, name string) error {
	a := t[name]
	if a == nil || !a.due() {
		return nil
	}
	slog.Warn("failpoint fired", "failpoint", name, "action", a.spec)
	switch a.kind {
	case kindPanic:
		panic(fmt.Sprintf("capo failpoint %s: panic", name))
	case kindExit:
		fmt.Fprintf(os.Stderr, "capo failpoint %s: exit %d\n", name, ExitCode)
		os.Exit(ExitCode)
	case kindSleep:
		time.Sleep(a.sleep)
	case kindError:
		return &Error{Point: name}
	}
	return nil
}

const (
	kindPanic = "panic"
	kindExit  = "exit"
	kindSleep = "sleep"
	kindError = "error"
)

// action is what an armed point does, and how often.
type action struct {
	spec    string
	kind    string
	sleep   time.Duration
	percent int          // of the hits that fire; 100 for all
	bounded bool         // N* given: left counts down
	left    atomic.Int64 // firings left, when bounded
}

func (a *action) due() bool {
	if a.percent < 100 && rand.IntN(100) >= a.percent { //nolint:gosec // G404: which hits fire need not be unpredictable
		return false
	}
	return !a.bounded || a.left.Add(-1) >= 0
}

func parseAction(s string) (*action, error) {
	a := &action{spec: s, percent: 100}
	rest := strings.TrimSpace(s)
	if p, tail, ok := strings.Cut(rest, "%"); ok {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 100 {
			return nil, fmt.Errorf("%q: the share before %% must be 1 to 100", s)
		}
		a.percent, rest = n, tail
	}
	if c, tail, ok := strings.Cut(rest, "*"); ok {
		n, err := strconv.Atoi(c)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%q: the count before * must be a positive number", s)
		}
		a.bounded = true
		a.left.Store(int64(n))
		rest = tail
	}
	switch {
	case rest == kindPanic, rest == kindExit, rest == kindError:
		a.kind = rest
	case strings.HasPrefix(rest, kindSleep+"(") && strings.HasSuffix(rest, ")"):
		d, err := time.ParseDuration(rest[len(kindSleep)+1 : len(rest)-1])
		if err != nil || d <= 0 {
			return nil, fmt.Errorf("%q: sleep wants a positive duration, e.g. sleep(2s)", s)
		}
		a.kind, a.sleep = kindSleep, d
	default:
		return nil, fmt.Errorf("%q: the action must be panic, exit, sleep(duration) or error", s)
	}
	return a, nil
}
