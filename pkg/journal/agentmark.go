package journal

import (
	"encoding/json"
	"os"
	"path/filepath"

	"github.com/capo-net/capo/pkg/fsutil"
)

// agentMarkFile, in the state dir, names the pod the node's capo-agent
// runs as: capo-ipam, finding no agent, asks whether that pod still exists
// before it takes capo as uninstalled (plugin/gone.go).
const agentMarkFile = "agent.json"

// AgentMark names the pod the node's capo-agent runs as.
type AgentMark struct {
	Namespace string `json:"namespace"`
	Pod       string `json:"pod"`
	// Node is the Kubernetes node the agent serves: capo-ipam asks whether
	// it is still opted in before it takes capo as uninstalled. An older
	// agent wrote none, and capo-ipam then never takes capo as gone.
	Node string `json:"node,omitempty"`
}

// WriteAgentMark is called by capo-agent as it starts.
func (d Dir) WriteAgentMark(m AgentMark) error {
	data, _ := json.Marshal(m)
	if err := os.MkdirAll(d.Root, 0o700); err != nil {
		return err
	}
	return fsutil.WriteFileAtomic(filepath.Join(d.Root, agentMarkFile), data, 0o600)
}

// AgentMark is the pod the node's last agent named; nil when none did or
// the file does not read.
func (d Dir) AgentMark() *AgentMark {
	data, err := os.ReadFile(filepath.Join(d.Root, agentMarkFile))
	if err != nil {
		return nil
	}
	var m AgentMark
	if json.Unmarshal(data, &m) != nil || m.Namespace == "" || m.Pod == "" {
		return nil
	}
	return &m
}
