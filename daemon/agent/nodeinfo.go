package agent

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"

	"github.com/capo-net/capo/install"
	"github.com/capo-net/capo/pkg/journal"
	"github.com/capo-net/capo/pkg/version"
	"github.com/capo-net/capo/pkg/wire"
)

// NodeInfoPath is the agent's read-only view of its node, for `capoctl
// status` and `capoctl bundle`: the CNI conflists it manages and the
// journal capo-ipam wrote. It is served beside /metrics, which the API
// server's pod proxy reaches (pods/proxy, an operator's right), so no
// shell on the node is needed. It writes nothing.
const NodeInfoPath = "/debug/capo/node"

// NodeInfo is what NodeInfoPath answers.
type NodeInfo struct {
	Node    string `json:"node"`
	Version string `json:"version"`
	Wire    int    `json:"wireVersion"`
	// CNIConfDir is "" when the agent does not manage the chain
	// (--manage-cni off): it does not know where the conflists are.
	CNIConfDir string            `json:"cniConfDir,omitempty"`
	Conflists  map[string]string `json:"conflists,omitempty"`
	// CapoIPAMInChain says whether the config the runtime uses has
	// capo-ipam as its IPAM; nil when it cannot tell.
	CapoIPAMInChain *bool          `json:"capoIPAMInChain,omitempty"`
	RuntimeConf     string         `json:"runtimeConf,omitempty"` // the file the runtime uses
	Journal         []JournalEntry `json:"journal"`
	AddrRecords     int            `json:"addrRecords"`
	Errors          []string       `json:"errors,omitempty"`
}

// JournalEntry is one pending DEL capo-ipam journaled, or why it cannot
// be read.
type JournalEntry struct {
	Name   string          `json:"name"`
	Record *journal.Record `json:"record,omitempty"`
	Error  string          `json:"error,omitempty"`
}

func (a *Agent) handleNodeInfo(w http.ResponseWriter, _ *http.Request) {
	info := nodeInfo(a.opts.NodeName, a.opts.CNIConfDir, journal.Dir{Root: a.opts.StateDir})
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(info)
}

// nodeInfo reads the node's conflists and journal; what it cannot read is
// named in Errors, never a failed answer.
func nodeInfo(node, confDir string, j journal.Dir) NodeInfo {
	info := NodeInfo{Node: node, Version: version.Version, Wire: wire.Version, CNIConfDir: confDir, Journal: []JournalEntry{}}
	if confDir != "" {
		info.readConf(confDir)
	}
	pending, err := j.Pending()
	if err != nil {
		info.Errors = append(info.Errors, err.Error())
	}
	for _, e := range pending {
		je := JournalEntry{Name: e.Name, Record: e.Record}
		if e.Err != nil {
			je.Error = e.Err.Error()
		}
		info.Journal = append(info.Journal, je)
	}
	recs, err := j.AddrRecords()
	if err != nil {
		info.Errors = append(info.Errors, err.Error())
	}
	info.AddrRecords = len(recs)
	return info
}

// readConf reads every CNI config in confDir and whether the one the
// runtime uses has capo-ipam in its chain.
func (info *NodeInfo) readConf(confDir string) {
	info.Conflists = map[string]string{}
	for _, pat := range []string{"*.conflist", "*.conf", "*.json"} {
		names, _ := filepath.Glob(filepath.Join(confDir, pat))
		for _, p := range names {
			if b, err := os.ReadFile(p); err != nil {
				info.Errors = append(info.Errors, err.Error())
			} else {
				info.Conflists[filepath.Base(p)] = string(b)
			}
		}
	}
	used, err := install.RuntimeConfig(confDir)
	if err != nil {
		info.Errors = append(info.Errors, err.Error())
		return
	}
	st, err := install.Inspect([]byte(info.Conflists[filepath.Base(used)]))
	if err != nil {
		info.Errors = append(info.Errors, filepath.Base(used)+": "+err.Error())
		return
	}
	info.RuntimeConf, info.CapoIPAMInChain = filepath.Base(used), &st.Installed
}
