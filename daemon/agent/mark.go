package agent

import (
	"log/slog"
	"os"

	"github.com/capo-net/capo/pkg/journal"
)

// markPresence names this agent's pod in the state dir. capo-ipam, finding
// no agent, asks the API server whether that pod still exists: one gone
// for minutes with no agent in its place means capo was uninstalled and
// the node must not stay stranded (plugin/gone.go).
func (a *Agent) markPresence() {
	ns, pod := os.Getenv("POD_NAMESPACE"), os.Getenv("POD_NAME")
	if pod == "" {
		return // not run as a pod: capo-ipam never takes capo as gone
	}
	if err := (journal.Dir{Root: a.opts.StateDir}).WriteAgentMark(journal.AgentMark{Namespace: ns, Pod: pod}); err != nil {
		slog.Warn("cannot name this agent's pod in the state dir; capo-ipam will journal, never release, if the agent goes for good", "dir", a.opts.StateDir, "err", err)
	}
}
