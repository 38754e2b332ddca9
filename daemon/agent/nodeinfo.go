package agent

import (
	"encoding/json"
	"io"
	"os"
	"path/filepath"

	"github.com/capo-net/capo/install"
	"github.com/capo-net/capo/pkg/journal"
	"github.com/capo-net/capo/pkg/redact"
	"github.com/capo-net/capo/pkg/version"
	"github.com/capo-net/capo/pkg/wire"
)

// NodeInfoPath is the agent's summary of its node, for `capoctl status`:
// which CNI config the runtime uses, whether capo-ipam is its IPAM, the
// wire version, how many DELs are journaled. It is served beside
// /metrics, which every pod on the node network reaches, so it holds no
// file's content and names no pod: what is in the conflists and the
// journal is read only through NodeInfoCommand.
const NodeInfoPath = "/debug/capo/node"

// NodeInfoCommand is the agent binary's command that prints the full view
// (NodeInfo) and exits. capoctl bundle runs it in the agent's container
// through the API server (pods/exec, an operator's right): only who may
// exec into capo's pods reads the node's CNI configs and journal, and
// then with their secrets redacted.
const NodeInfoCommand = "node-info"

// NodeInfo is the node view: the summary, and with NodeInfoCommand the
// CNI configs and the journal.
type NodeInfo struct {
	Node    string `json:"node"`
	Version string `json:"version"`
	Wire    int    `json:"wireVersion"`
	// CNIConfDir is "" when the agent does not manage the chain
	// (--manage-cni off): it does not know where the conflists are.
	CNIConfDir string `json:"cniConfDir,omitempty"`
	// Conflists are the CNI configs, secrets redacted; a file that is
	// not JSON is withheld (redaction needs its structure).
	Conflists map[string]string `json:"conflists,omitempty"`
	// CapoIPAMInChain says whether the config the runtime uses has
	// capo-ipam as its IPAM; nil when it cannot tell.
	CapoIPAMInChain *bool          `json:"capoIPAMInChain,omitempty"`
	RuntimeConf     string         `json:"runtimeConf,omitempty"` // the file the runtime uses
	JournalDepth    int            `json:"journalDepth"`
	Journal         []JournalEntry `json:"journal,omitempty"`
	AddrRecords     int            `json:"addrRecords"`
	Errors          []string       `json:"errors,omitempty"`
}

// JournalEntry is one pending DEL capo-ipam journaled, or why it cannot
// be read. The record's netconf is in Netconf, redacted.
type JournalEntry struct {
	Name    string          `json:"name"`
	Record  *journal.Record `json:"record,omitempty"`
	Netconf json.RawMessage `json:"netconf,omitempty"`
	Error   string          `json:"error,omitempty"`
}

// WriteNodeInfo prints the full node view (NodeInfoCommand) to w.
func WriteNodeInfo(w io.Writer, opts Options) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false) // redact.Mark reads as itself
	return enc.Encode(nodeInfo(opts.NodeName, opts.CNIConfDir, journal.Dir{Root: opts.StateDir}))
}

// nodeInfo reads the node's conflists and journal, redacted; what it
// cannot read is named in Errors, never a failed answer.
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
		info.Journal = append(info.Journal, journalEntry(e))
	}
	info.JournalDepth = len(info.Journal)
	recs, err := j.AddrRecords()
	if err != nil {
		info.Errors = append(info.Errors, err.Error())
	}
	info.AddrRecords = len(recs)
	for i, e := range info.Errors {
		out, _ := redact.Text([]byte(e))
		info.Errors[i] = string(out)
	}
	return info
}

// summary is info without what only NodeInfoCommand shows.
func (info NodeInfo) summary() NodeInfo {
	info.Conflists, info.Journal = nil, nil
	return info
}

// journalEntry is e with its netconf and environment redacted.
func journalEntry(e journal.Entry) JournalEntry {
	je := JournalEntry{Name: e.Name}
	if e.Err != nil {
		je.Error = e.Err.Error()
	}
	if e.Record == nil {
		return je
	}
	rec := *e.Record
	if len(rec.Netconf) > 0 {
		if nc, _, err := redact.JSON(rec.Netconf); err == nil {
			je.Netconf = nc
		} else {
			je.Error = "netconf withheld: " + err.Error()
		}
	}
	rec.Netconf = nil
	rec.Env = map[string]string{}
	for k, v := range e.Record.Env {
		out, _ := redact.Text([]byte(v))
		rec.Env[k] = string(out)
	}
	je.Record = &rec
	return je
}

// readConf reads every CNI config in confDir, redacted, and whether the
// one the runtime uses has capo-ipam in its chain.
func (info *NodeInfo) readConf(confDir string) {
	info.Conflists = map[string]string{}
	raw := map[string][]byte{}
	for _, pat := range []string{"*.conflist", "*.conf", "*.json"} {
		names, _ := filepath.Glob(filepath.Join(confDir, pat))
		for _, p := range names {
			b, err := os.ReadFile(p)
			if err != nil {
				info.Errors = append(info.Errors, err.Error())
				continue
			}
			raw[filepath.Base(p)] = b
			if out, _, err := redact.JSON(b); err == nil {
				info.Conflists[filepath.Base(p)] = string(out)
			} else {
				info.Conflists[filepath.Base(p)] = "<withheld: " + err.Error() + ">"
			}
		}
	}
	used, err := install.RuntimeConfig(confDir)
	if err != nil {
		info.Errors = append(info.Errors, err.Error())
		return
	}
	st, err := install.Inspect(raw[filepath.Base(used)])
	if err != nil {
		info.Errors = append(info.Errors, filepath.Base(used)+": "+err.Error())
		return
	}
	info.RuntimeConf, info.CapoIPAMInChain = filepath.Base(used), &st.Installed
}
