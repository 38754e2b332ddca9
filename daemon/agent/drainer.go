package agent

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/capo-net/capo/pkg/calico/apigroup"
	"github.com/capo-net/capo/pkg/calico/ipam"
	"github.com/capo-net/capo/pkg/failpoint"
	"github.com/capo-net/capo/pkg/journal"
	"github.com/capo-net/capo/pkg/pause"
	"github.com/capo-net/capo/pkg/wire"
	"github.com/capo-net/capo/plugin"
)

// Releaser runs the delegate's DEL for a journaled record.
type Releaser interface {
	Release(ctx context.Context, rec *journal.Record) error
}

// execReleaser replays the DEL through the delegate binary, with the netconf
// and CNI arguments the runtime gave capo-ipam.
type execReleaser struct {
	cniBinDir string
}

func (r *execReleaser) Release(ctx context.Context, rec *journal.Record) error {
	m, _ := apigroup.InForce()
	conf, err := plugin.ParseNetConf(apigroup.InGroup(rec.Netconf, m))
	if err != nil {
		return fmt.Errorf("journaled netconf: %w", err)
	}
	paths := filepath.SplitList(rec.Env["CNI_PATH"])
	if r.cniBinDir != "" {
		paths = []string{r.cniBinDir}
	}
	// A clean environment, as a runtime gives: the agent's own datastore
	// settings must not leak into calico-ipam.
	env := []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
	for k, v := range rec.Env {
		if strings.HasPrefix(k, "CNI_") {
			env = append(env, k+"="+v)
		}
	}
	d := &plugin.ExecDelegate{Paths: paths, Env: env}
	ctx, cancel := context.WithTimeout(ctx, conf.IPAM.DelegateTimeout.D())
	defer cancel()
	_, err = d.Invoke(ctx, "DEL", conf)
	return err
}

// drainer replays the DELs capo-ipam journaled while the agent could not
// answer.
type drainer struct {
	journal  journal.Dir
	ipam     ipam.Reader
	decider  Decider
	release  Releaser
	timeout  func() time.Duration // for one decision
	interval time.Duration
	metrics  *metrics
	// turn keeps one replay of a record at a time: the periodic pass, and
	// a returning pod's ADD that replays its own teardown first
	// (replayPod), which waits for its turn no longer than its answer may.
	turnOnce sync.Once
	turn     chan struct{}
}

func (dr *drainer) run(ctx context.Context) {
	for {
		dr.drain(ctx)
		if !pause.Sleep(ctx, dr.interval) {
			return
		}
	}
}

// drain replays every journaled DEL: reserve first, then release. A record
// goes only when both have succeeded; otherwise it stays for the next pass.
func (dr *drainer) drain(ctx context.Context) {
	entries, err := dr.journal.Pending()
	if err != nil {
		slog.Error("reading the journal", "dir", dr.journal.Root, "err", err)
		return
	}
	dr.metrics.journalDepth.Set(float64(len(entries)))
	left := len(entries)
	for _, e := range entries {
		if ctx.Err() != nil {
			return
		}
		if e.Err != nil {
			slog.Error("journal record needs an operator", "err", e.Err)
			continue
		}
		if dr.replayOnce(ctx, e.Name, e.Record) {
			left--
		}
	}
	dr.metrics.journalDepth.Set(float64(left))
}

// replayOnce replays a listed record unless another replay took it since
// the listing (true then too: it is gone).
func (dr *drainer) replayOnce(ctx context.Context, name string, rec *journal.Record) bool {
	dr.turnOnce.Do(func() { dr.turn = make(chan struct{}, 1) })
	select {
	case dr.turn <- struct{}{}:
	case <-ctx.Done():
		return false
	}
	defer func() { <-dr.turn }()
	if !dr.journal.Has(name) {
		return true
	}
	return dr.replay(ctx, name, rec)
}

// replayPod replays the journaled teardowns of pod (namespace and name) at
// once, before its ADD is answered: after a reboot, or with the agent away
// as a member's sandbox went, the member's ADD waits for the agent, and an
// offer made before the replay would find nothing reserved and the address
// still allocated to the old sandbox.
func (dr *drainer) replayPod(ctx context.Context, pod wire.PodRef) {
	entries, err := dr.journal.Pending()
	if err != nil || len(entries) == 0 {
		return
	}
	for _, e := range journal.TeardownsOf(entries, pod) {
		if dr.replayOnce(ctx, e.Name, e.Record) {
			slog.Info("replayed a returning pod's own journaled teardown before its ADD", "pod", pod.Namespace+"/"+pod.Name, "record", e.Name)
		}
	}
}

func (dr *drainer) replay(ctx context.Context, name string, rec *journal.Record) bool {
	if rec.Attempts == 0 {
		dr.metrics.decisions.WithLabelValues("journaled", "journal").Inc()
	}
	fail := func(step string, err error) bool {
		rec.Attempts++
		if uerr := dr.journal.Update(name, rec); uerr != nil {
			slog.Warn("updating journal record", "record", name, "err", uerr)
		}
		slog.Error("journaled DEL not replayed yet; the address stays allocated", "step", step, "record", name, "attempts", rec.Attempts, "err", err)
		return false
	}
	if err := replayGroup(rec); err != nil {
		return fail("reserve", err)
	}
	dctx, cancel := context.WithTimeout(ctx, dr.timeout())
	req := rec.Request
	if len(req.RecordedIPs) > 0 {
		// Long enough away, and Calico's GC may have freed and reused them.
		req.RecordedIPs = notReused(dctx, dr.ipam, req.Handle(), req.Pod, req.RecordedIPs)
	}
	resp, err := dr.decider.Decide(dctx, &req)
	cancel()
	if err != nil {
		dr.metrics.decisions.WithLabelValues("failed", "journal").Inc()
		return fail("reserve", err)
	}
	dr.metrics.decisions.WithLabelValues(string(resp.Outcome), "journal").Inc()
	failpoint.Hit(failpoint.AgentReplay)
	if err := dr.release.Release(ctx, rec); err != nil {
		dr.metrics.releases.WithLabelValues("error").Inc()
		return fail("release", err)
	}
	dr.metrics.releases.WithLabelValues("success").Inc()
	r := rec.Request
	if err := dr.journal.ForgetAddrs(r.Network, r.ContainerID, r.IfName); err != nil {
		slog.Warn("removing ADD record", "err", err)
	}
	if err := dr.journal.Remove(name); err != nil {
		slog.Error("removing replayed journal record", "record", name, "err", err)
		return false
	}
	slog.Info("journaled DEL replayed", "pod", r.Pod.Namespace+"/"+r.Pod.Name, "outcome", resp.Outcome, "ips", resp.IPs,
		"waited", time.Since(rec.Created).Round(time.Second))
	return true
}

// replayGroup keeps a journaled teardown whose call named another Calico
// API group than this agent decided by discovery alone: nothing tells it
// which is the node's. An agent told its group (CALICO_API_GROUP, the
// node's calico_api_group) replays in that group (apigroup.InGroup).
func replayGroup(rec *journal.Record) error {
	m, ok := apigroup.InForce()
	if !ok || m.Source != apigroup.SourceDiscovery {
		return nil
	}
	if err := apigroup.Agrees(m, rec.Request.CalicoAPIGroup); err != nil {
		return fmt.Errorf("the journaled call used Calico's API group %s, this agent %s: set %s to the node's group: %w", rec.Request.CalicoAPIGroup, m, apigroup.EnvGroup, err)
	}
	return nil
}
