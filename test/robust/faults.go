package robust

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/capo-net/capo/pkg/failpoint"
	"github.com/capo-net/capo/pkg/pause"
	"github.com/capo-net/capo/test/testbed"
)

// The faults, by kind.
const (
	fAgentKill  = "agent-sigkill"         // a node's capo-agent killed, restarted after a while
	fCtlKill    = "controller-sigkill"    // the leading capo-controller killed: the standby takes over
	fLeader     = "leader-change"         // the leader stopped gracefully (SIGTERM): it hands over
	fAgentFP    = "agent-failpoints"      // an agent restarted with failpoints armed, then without
	fCtlFP      = "controller-failpoints" // the controllers likewise
	fPluginFP   = "capo-ipam-failpoints"  // capo-ipam's failpoints armed for the runtime's calls
	fAPIErrors  = "api-errors"            // the proxy fails a share of capo's API requests
	fAPIServer  = "apiserver-restart"     // kube-apiserver stopped, then started
	fEtcd       = "etcd-restart"          // etcd stopped, then started
	fGC         = "calico-gc"             // Calico's kube-controllers (its IPAM GC) running
	fConflist   = "conflist-rewrite"      // calico-node's install-cni rewrites a node's conflist
	fLock       = "datastore-lock"        // Calico's datastore locked (datastoreReady false), then unlocked
	serverGroup = "servers"               // apiserver and etcd restarts never overlap
	apartGroup  = "apart"                 // Config.Apart's kinds never overlap
)

// AllFaults are every kind, in the order their figures are printed.
var AllFaults = []string{fAgentKill, fCtlKill, fLeader, fAgentFP, fCtlFP, fPluginFP, fAPIErrors, fAPIServer, fEtcd, fGC, fConflist, fLock}

// fault is one injection: it begins, lasts d, ends. Detail says what it
// touched.
type fault func(ctx context.Context, c *cluster, r *rand.Rand, d time.Duration) (detail string, err error)

var faultsByKind = map[string]fault{
	fAgentKill: agentKill, fCtlKill: controllerKill, fLeader: leaderChange,
	fAgentFP: agentFailpoints, fCtlFP: controllerFailpoints, fPluginFP: pluginFailpoints,
	fAPIErrors: apiErrors, fAPIServer: apiServerRestart, fEtcd: etcdRestart,
	fGC: calicoGC, fConflist: conflistRewrite, fLock: datastoreLock,
}

// injector starts faults at random moments (seeded), several at once but
// never two of one kind, until ctx ends; wait waits for those running.
type injector struct {
	c       *cluster
	r       *rand.Rand
	kinds   []string
	mu      sync.Mutex
	running map[string]bool
	wg      sync.WaitGroup
	errs    chan error
}

func (in *injector) run(ctx context.Context) {
	for {
		gap := time.Duration(in.r.ExpFloat64() * float64(in.c.cfg.FaultEvery))
		if !pause.Sleep(ctx, gap) {
			return
		}
		kind := in.kinds[in.r.IntN(len(in.kinds))]
		d := in.c.cfg.FaultMin + time.Duration(in.r.Int64N(int64(in.c.cfg.FaultMax-in.c.cfg.FaultMin)+1))
		if kind == fAgentKill && in.r.IntN(10) == 0 {
			d = in.c.cfg.LeakGrace + 5*time.Second // away longer than Calico's GC waits
		}
		seed := in.r.Uint64()
		group := kind
		if kind == fAPIServer || kind == fEtcd {
			group = serverGroup
		}
		if slices.Contains(in.c.cfg.Apart, kind) {
			group = apartGroup
		}
		if !in.claim(group) {
			continue
		}
		in.wg.Add(1)
		go func() {
			defer in.wg.Done()
			defer in.free(group)
			in.inject(ctx, kind, rand.New(rand.NewPCG(seed, 1)), d)
		}()
	}
}

func (in *injector) claim(group string) bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.running[group] {
		return false
	}
	in.running[group] = true
	return true
}

func (in *injector) free(group string) {
	in.mu.Lock()
	defer in.mu.Unlock()
	delete(in.running, group)
}

func (in *injector) inject(ctx context.Context, kind string, r *rand.Rand, d time.Duration) {
	ev := in.c.hist.Begin(Event{Op: opFault, Value: kind})
	detail, err := faultsByKind[kind](ctx, in.c, r, d)
	in.c.hist.EndWith(ev, nil, detail, err)
	if !errors.As(err, new(broken)) {
		return // none, or not made (another fault in the way): the run goes on
	}
	select {
	case in.errs <- fmt.Errorf("fault %s: %w", kind, err):
	default:
	}
}

// broken is a fault's failure that leaves the cluster broken (a server
// that does not come back, a datastore left locked): the run stops.
type broken struct{ error }

func (in *injector) wait() { in.wg.Wait() }

func agentKill(ctx context.Context, c *cluster, r *rand.Rand, d time.Duration) (string, error) {
	n := c.nodes[r.IntN(len(c.nodes))]
	n.hold(func(a *testbed.Agent) { a.Kill() })
	defer n.release()
	pause.Sleep(ctx, d)
	return fmt.Sprintf("%s for %s", n.env.Node, d.Round(time.Millisecond)), nil
}

func controllerKill(ctx context.Context, c *cluster, _ *rand.Rand, d time.Duration) (string, error) {
	l := c.leader()
	l.hold(func(ctl *testbed.Controller) { ctl.Kill() })
	defer l.release()
	pause.Sleep(ctx, d)
	return fmt.Sprintf("%s for %s", l.id, d.Round(time.Millisecond)), nil
}

func leaderChange(ctx context.Context, c *cluster, _ *rand.Rand, d time.Duration) (string, error) {
	l := c.leader()
	l.hold(func(ctl *testbed.Controller) { ctl.Stop() })
	defer l.release()
	pause.Sleep(ctx, d)
	return fmt.Sprintf("%s stopped for %s", l.id, d.Round(time.Millisecond)), nil
}

// agentFailpoints restarts a node's agent with one of the agent's points
// armed for d, then without.
func agentFailpoints(ctx context.Context, c *cluster, r *rand.Rand, d time.Duration) (string, error) {
	n := c.nodes[r.IntN(len(c.nodes))]
	point := []string{failpoint.AgentReserved, failpoint.AgentReplay, failpoint.AgentOffer, failpoint.AgentSettle}[r.IntN(4)]
	action := []string{"30%exit", "50%sleep(4s)", "20%panic"}[r.IntN(3)]
	if point == failpoint.AgentReserved && r.IntN(2) == 0 {
		action = "30%error"
	}
	spec := point + "=" + action
	n.restartWith(spec)
	pause.Sleep(ctx, d)
	n.restartWith(c.cfg.AgentFailpoints)
	return fmt.Sprintf("%s on %s for %s", spec, n.env.Node, d.Round(time.Millisecond)), nil
}

func controllerFailpoints(ctx context.Context, c *cluster, r *rand.Rand, d time.Duration) (string, error) {
	spec := failpoint.ControllerReleasePass + "=" + []string{"30%exit", "50%sleep(3s)"}[r.IntN(2)]
	for _, rep := range c.ctrls {
		rep.restartWith(spec)
	}
	pause.Sleep(ctx, d)
	for _, rep := range c.ctrls {
		rep.restartWith("")
	}
	return fmt.Sprintf("%s for %s", spec, d.Round(time.Millisecond)), nil
}

// pluginFailpoints arms capo-ipam's points in the environment the runtime
// runs the chain with.
func pluginFailpoints(ctx context.Context, c *cluster, r *rand.Rand, d time.Duration) (string, error) {
	spec := []string{
		failpoint.PluginBeforeRelease + "=30%exit",
		failpoint.PluginJournalWrite + "=50%error",
		failpoint.PluginBeforeRelease + "=20%panic;" + failpoint.PluginJournalWrite + "=30%exit",
	}[r.IntN(3)]
	_ = os.Setenv(failpoint.EnvVar, spec)
	defer func() { _ = os.Unsetenv(failpoint.EnvVar) }()
	pause.Sleep(ctx, d)
	return fmt.Sprintf("%s for %s", spec, d.Round(time.Millisecond)), nil
}

func apiErrors(ctx context.Context, c *cluster, r *rand.Rand, d time.Duration) (string, error) {
	rate := []int{50, 200, 500}[r.IntN(3)]
	c.proxy.SetRate(rate)
	defer c.proxy.SetRate(0)
	pause.Sleep(ctx, d)
	return fmt.Sprintf("%d‰ for %s", rate, d.Round(time.Millisecond)), nil
}
