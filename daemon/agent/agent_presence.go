package agent

import (
	"log/slog"
	"os"

	"github.com/capo-net/capo/pkg/journal"
)

// markPresence names this agent's pod and node in the state dir. capo-ipam,
// finding no agent, asks the API server whether that pod still exists and
// whether the node is still opted in: the pod gone for uninstalled_after
// from a node that is no longer opted in means capo is not wanted there,
// and the node must not stay stranded (plugin/gone.go).
func (a *Agent) markPresence() {
	ns, pod := os.Getenv("POD_NAMESPACE"), os.Getenv("POD_NAME")
	if pod == "" {
		return // not run as a pod: capo-ipam never takes capo as gone
	}
	if err := (journal.Dir{Root: a.opts.StateDir}).WriteAgentMark(journal.AgentMark{Namespace: ns, Pod: pod, Node: a.opts.NodeName}); err != nil {
		slog.Warn("cannot name this agent's pod in the state dir; capo-ipam will journal, never release, if the agent goes for good", "dir", a.opts.StateDir, "err", err)
	}
}
