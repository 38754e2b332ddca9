package robust

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	"github.com/capo-net/capo/pkg/failpoint"
	"github.com/capo-net/capo/pkg/pause"
	"github.com/capo-net/capo/test/testbed"
)

// capo's processes are kept running as the kubelet keeps a pod's
// container running: one that exits on its own (a failpoint's exit, a
// crash) is started again after a moment, unless a fault holds it down.

// keepUp restarts the node's agent whenever it is down and not held,
// until ctx ends.
func (n *node) keepUp(ctx context.Context, c *cluster) {
	for pause.Sleep(ctx, 300*time.Millisecond) {
		n.mu.Lock()
		a, held := n.agent, n.held
		n.mu.Unlock()
		if held > 0 || a != nil && !a.Exited() {
			continue
		}
		if a != nil {
			why := exitCause(a.Log())
			c.hist.Record(Event{Op: opCrash, Node: n.env.Node, Reason: "capo-agent exited: " + why, Detail: "capo-agent exited on its own: " + why}, time.Now())
			_ = try(a.Stop) // its pod reported NotReady
			n.mu.Lock()
			n.agent = nil
			n.mu.Unlock()
		}
		if err := n.start(c); err != nil {
			c.hist.Record(Event{Op: opCrash, Node: n.env.Node, Reason: "capo-agent did not start", Detail: "capo-agent did not start (started again): " + firstLine(err.Error(), 200)}, time.Now())
		}
	}
}

// hold stops the agent with stop (Kill, Stop) and keeps it down until
// release.
func (n *node) hold(stop func(*testbed.Agent)) {
	n.mu.Lock()
	a := n.agent
	n.held, n.agent = n.held+1, nil
	n.mu.Unlock()
	if a != nil {
		_ = try(func() { stop(a) })
	}
}

func (n *node) release() {
	n.mu.Lock()
	n.held--
	n.mu.Unlock()
}

// restartWith restarts the agent (SIGTERM, as a rollout does) with its
// failpoints armed as spec says.
func (n *node) restartWith(spec string) {
	n.hold(func(a *testbed.Agent) { a.Stop() })
	n.mu.Lock()
	n.fp = spec
	n.mu.Unlock()
	n.release()
}

func (r *replica) keepUp(ctx context.Context, c *cluster) {
	for pause.Sleep(ctx, 300*time.Millisecond) {
		r.mu.Lock()
		ctl, held := r.ctl, r.held
		r.mu.Unlock()
		if held > 0 || ctl != nil && !ctl.Exited() {
			continue
		}
		if ctl != nil {
			why := exitCause(ctl.Log())
			c.hist.Record(Event{Op: opCrash, Reason: "capo-controller exited: " + why, Detail: "capo-controller " + r.id + " exited on its own: " + why}, time.Now())
			r.mu.Lock()
			r.ctl = nil
			r.mu.Unlock()
		}
		if err := r.start(c); err != nil {
			c.hist.Record(Event{Op: opCrash, Reason: "capo-controller did not start", Detail: "capo-controller " + r.id + " did not start (started again): " + firstLine(err.Error(), 200)}, time.Now())
		}
	}
}

func (r *replica) hold(stop func(*testbed.Controller)) {
	r.mu.Lock()
	ctl := r.ctl
	r.held, r.ctl = r.held+1, nil
	r.mu.Unlock()
	if ctl != nil {
		_ = try(func() { stop(ctl) })
	}
}

func (r *replica) release() {
	r.mu.Lock()
	r.held--
	r.mu.Unlock()
}

func (r *replica) restartWith(spec string) {
	r.hold(func(ctl *testbed.Controller) { ctl.Stop() })
	r.mu.Lock()
	r.fp = spec
	r.mu.Unlock()
	r.release()
}

// leader is the replica that says it leads (the first when none says so).
func (c *cluster) leader() *replica {
	for _, r := range c.ctrls {
		r.mu.Lock()
		ctl := r.ctl
		r.mu.Unlock()
		leading := false
		if ctl != nil && try(func() { leading = ctl.Leading() }) == nil && leading {
			return r
		}
	}
	return c.ctrls[0]
}

// keepAllUp runs every keeper until ctx ends.
func (c *cluster) keepAllUp(ctx context.Context) {
	for _, n := range c.nodes {
		go n.keepUp(ctx, c)
	}
	for _, r := range c.ctrls {
		go r.keepUp(ctx, c)
	}
}

func fpEnv(fp string) []string {
	if fp == "" {
		return nil
	}
	return []string{failpoint.EnvVar + "=" + fp}
}

// start runs the node's agent as a DaemonSet pod would, its clients
// through the proxy, with the node's failpoints. A fault that took the
// node down meanwhile stops it again.
func (n *node) start(c *cluster) error {
	n.mu.Lock()
	fp := n.fp
	n.mu.Unlock()
	var a *testbed.Agent
	if err := try(func() {
		a = n.env.StartAgentWith(testbed.AgentOptions{ManageCNI: n.cni, Kubeconfig: c.proxy.Kubeconfig, Env: fpEnv(fp)})
	}); err != nil {
		return err
	}
	n.mu.Lock()
	stale := n.held > 0 || n.fp != fp
	if !stale {
		n.agent = a
	}
	n.mu.Unlock()
	if stale {
		return try(a.Stop)
	}
	return nil
}

func (r *replica) start(c *cluster) error {
	r.mu.Lock()
	fp := r.fp
	r.mu.Unlock()
	var ctl *testbed.Controller
	if err := try(func() {
		ctl = r.env.StartControllerWith(r.id, testbed.AgentOptions{Kubeconfig: c.proxy.Kubeconfig, Env: fpEnv(fp)})
	}); err != nil {
		return err
	}
	r.mu.Lock()
	stale := r.held > 0 || r.fp != fp
	if !stale {
		r.ctl = ctl
	}
	r.mu.Unlock()
	if stale {
		return try(ctl.Stop)
	}
	return nil
}

// exitCause is the last thing a process that exited logged at warning or
// error level: the message (for a failed start, with what it was doing),
// without the error's text, so that causes count together.
func exitCause(log string) string {
	lines := strings.Split(strings.TrimSpace(log), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		var l struct{ Level, Msg, Err string }
		if json.Unmarshal([]byte(lines[i]), &l) == nil && (l.Level == "ERROR" || l.Level == "WARN") && l.Msg != "" {
			if l.Msg == "startup" {
				doing, _, _ := strings.Cut(l.Err, ":")
				return "startup: " + firstLine(doing, 60)
			}
			return firstLine(l.Msg, 80)
		}
		if strings.HasPrefix(lines[i], "panic:") || strings.HasPrefix(lines[i], "fatal error:") {
			return firstLine(lines[i], 80)
		}
	}
	return "nothing logged at warning or error level"
}
