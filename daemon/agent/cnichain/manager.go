// Package cnichain manages the node's CNI chain for capo-agent: capo-ipam
// installed in front of calico-ipam while the node is opted in, Calico's
// own chain otherwise, re-applied whenever calico-node rewrites it, and
// restored when capo is removed from the cluster (not when it restarts).
package cnichain

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/capo-net/capo/install"
	"github.com/capo-net/capo/pkg/journal"
	"github.com/capo-net/capo/pkg/selection"
)

// Manager keeps the node's CNI chain as the opt-in annotation says:
// capo-ipam installed while the node is opted in, Calico's own chain
// otherwise. calico-node rewrites its conflist and recopies its binaries
// whenever it starts, so the directories are watched and the edit is
// re-applied at once; a periodic check covers a missed event.
type Manager struct {
	node    func() *metav1.PartialObjectMetadata // this node as last seen
	opts    install.Options
	resync  time.Duration
	metrics Metrics
	// reapplied hears when capo was put back after a rewrite: teardowns in
	// between went around capo-ipam, and the sweep looks for them.
	reapplied chan<- struct{}
	journal   journal.Dir // its ADD records go on uninstall
	trigger   chan struct{}
	applied   bool // installed at least once since start: later changes are re-applies
	checked   chan struct{}
	once      sync.Once
}

// Metrics are the manager's share of the agent's metrics.
type Metrics struct {
	Installed prometheus.Gauge       // 1 while capo-ipam is in the chain
	Reapplied *prometheus.CounterVec // re-applies after a rewrite, by what (config, binary)
	Errors    prometheus.Counter     // failed installs and uninstalls
}

// New is a manager of the chain opts describes, for the node node returns;
// it checks every resync besides the directories' events, and tells
// reapplied when it had to put capo back (teardowns in between went around
// capo-ipam). j's ADD records are named at uninstall.
func New(node func() *metav1.PartialObjectMetadata, opts install.Options, resync time.Duration, m Metrics, reapplied chan<- struct{}, j journal.Dir) *Manager {
	return &Manager{node: node, opts: opts, resync: resync, metrics: m, reapplied: reapplied, journal: j, trigger: make(chan struct{}, 1), checked: make(chan struct{})}
}

// Checked is closed once the manager has checked the chain since start
// (and put capo back if calico-node rewrote it meanwhile), whatever came
// of it: until then a teardown may read Calico's own conflist, and the
// agent is not ready (capo-controller covers the node).
func (m *Manager) Checked() <-chan struct{} { return m.checked }

// Poke has the manager look at the chain again (the node's opt-in changed).
func (m *Manager) Poke() {
	select {
	case m.trigger <- struct{}{}:
	default:
	}
}

// Run keeps the chain until ctx ends.
func (m *Manager) Run(ctx context.Context) {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		slog.Error("cannot watch the CNI directories; relying on the periodic check", "err", err)
	} else {
		defer w.Close()
		for _, d := range []string{m.opts.CNIConfDir, m.opts.CNIBinDir} {
			if err := w.Add(d); err != nil {
				slog.Error("cannot watch a CNI directory; relying on the periodic check", "dir", d, "err", err)
			}
		}
		go m.forward(ctx, w)
	}
	t := time.NewTicker(m.resync)
	defer t.Stop()
	for {
		m.reconcile()
		m.once.Do(func() { close(m.checked) })
		select {
		case <-ctx.Done():
			return
		case <-m.trigger:
			// Let a burst of writes (a conflist and several binaries) settle.
			time.Sleep(100 * time.Millisecond)
			for len(m.trigger) > 0 {
				<-m.trigger
			}
		case <-t.C:
		}
	}
}

// forward turns directory events into a reconcile; capo's own temp files
// and renames cause one harmless extra pass.
func (m *Manager) forward(ctx context.Context, w *fsnotify.Watcher) {
	for {
		select {
		case <-ctx.Done():
			return
		case _, ok := <-w.Events:
			if !ok {
				return
			}
			m.Poke()
		case err, ok := <-w.Errors:
			if !ok {
				return
			}
			slog.Warn("CNI directory watch", "err", err)
		}
	}
}

func (m *Manager) reconcile() {
	want := selection.NodeOptedIn(selection.Of(m.node()))
	if !want {
		r, err := install.Uninstall(m.opts)
		m.report("uninstall", r, err)
		m.applied = false
		if err == nil {
			m.remember(false)
		}
		return
	}
	r, err := install.Install(m.opts)
	m.report("install", r, err)
	if err == nil {
		m.applied = true
		m.remember(true)
	}
}

// optedInMark, in the agent's state dir, says the node was opted in when
// the agent last kept its chain: Restore puts capo back from it at start,
// before the API server can be read.
const optedInMark = "cni-opted-in"

func (m *Manager) remember(optedIn bool) {
	if m.journal.Root == "" {
		return
	}
	path := filepath.Join(m.journal.Root, optedInMark)
	var err error
	if optedIn {
		if _, statErr := os.Stat(path); statErr == nil {
			return
		}
		if err = os.MkdirAll(m.journal.Root, 0o700); err == nil { // the journal makes it at its first write
			err = os.WriteFile(path, []byte("capo-agent keeps capo-ipam in this node's CNI chain\n"), 0o600)
		}
	} else if err = os.Remove(path); os.IsNotExist(err) {
		err = nil
	}
	if err != nil {
		slog.Warn("cannot record the node's opt-in in the state dir: at the next start the chain waits for the API server", "err", err)
	}
}

// Restore puts capo-ipam back into the chain at once if the node was
// opted in when the agent last kept it (its mark in the state dir j), and
// says whether it had to change anything. It reads no API: an agent that
// starts while the API server cannot be reached (an outage; a node's
// reboot) and cannot go on would otherwise leave calico-node's rewritten
// conflist in place, and teardowns would free addresses with plain
// calico-ipam meanwhile. With capo-ipam in the chain and no agent, a DEL
// is journaled and its addresses kept. The manager, once the agent runs,
// follows the node's opt-in as ever.
func Restore(opts install.Options, j journal.Dir) (changed bool, err error) {
	if _, err := os.Stat(filepath.Join(j.Root, optedInMark)); err != nil {
		return false, nil // not opted in when last seen, or never kept
	}
	r, err := install.Install(opts)
	if err != nil {
		return false, err
	}
	return r.ConfigChanged || r.BinaryChanged, nil
}

// InChain reports whether the runtime's CNI config calls capo-ipam now.
func (m *Manager) InChain() bool {
	conf, err := install.RuntimeConfig(m.opts.CNIConfDir)
	if err != nil {
		return false
	}
	data, err := os.ReadFile(conf)
	if err != nil {
		return false
	}
	st, err := install.Inspect(data)
	return err == nil && st.Installed
}

func (m *Manager) report(op string, r *install.Result, err error) {
	switch {
	case err != nil:
		m.metrics.Errors.Inc()
		slog.Error("CNI "+op+" failed; retrying on the next change or check", "err", err)
	case r.AlreadyCorrect:
	case op == "install" && m.applied:
		if r.ConfigChanged {
			m.metrics.Reapplied.WithLabelValues("config").Inc()
		}
		if r.BinaryChanged {
			m.metrics.Reapplied.WithLabelValues("binary").Inc()
		}
		slog.Warn("re-applied capo to the CNI chain after it was rewritten (calico-node restarted?)", "config", r.Config, "config_changed", r.ConfigChanged, "binary_changed", r.BinaryChanged)
		select { // teardowns in the window went around capo-ipam: sweep for them
		case m.reapplied <- struct{}{}:
		default:
		}
	default:
		slog.Info("CNI "+op, "config", r.Config, "config_changed", r.ConfigChanged, "binary_changed", r.BinaryChanged || r.BinaryRemoved)
	}
	installed := 0.0
	if op == "install" && err == nil {
		installed = 1
	}
	m.metrics.Installed.Set(installed)
}

// OnExit uninstalls when capo is being removed from the cluster; a rolling
// update, a node reboot or a DaemonSet re-created under the same name
// leaves the node as it is. Restoring the chain is the only act: the ADD
// records and the journal stay, harmless, for an agent that comes later
// (a replace decided wrongly loses nothing its sweep cannot find).
func (m *Manager) OnExit(r *Removal) {
	ctx, cancel := context.WithTimeout(context.Background(), r.grace+10*time.Second)
	defer cancel()
	going, why := r.removing(ctx)
	if !going {
		slog.Info("stopping; capo stays in the CNI chain", "why", why)
		return
	}
	res, err := install.Uninstall(m.opts)
	m.report("uninstall", res, err)
	if err != nil {
		return
	}
	m.remember(false) // a removed capo does not put itself back at the next start
	slog.Info("capo is being removed: the node's CNI chain is Calico's own again; ADD records and journal kept", "why", why, "state_dir", m.journal.Root)
}
