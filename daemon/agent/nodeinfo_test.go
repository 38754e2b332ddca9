package agent

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/capo-net/capo/install"
	"github.com/capo-net/capo/pkg/journal"
	"github.com/capo-net/capo/pkg/wire"
)

const calicoConflist = `{"name":"k8s-pod-network","cniVersion":"0.3.1","plugins":[{"type":"calico","ipam":{"type":"calico-ipam"}},{"type":"portmap"}]}`

// The node view says which config the runtime uses and whether capo-ipam
// is its IPAM, and lists the journal, readably or not.
func TestNodeInfo(t *testing.T) {
	conf, state := t.TempDir(), journal.Dir{Root: t.TempDir()}
	if err := os.WriteFile(filepath.Join(conf, "10-calico.conflist"), []byte(calicoConflist), 0o600); err != nil {
		t.Fatal(err)
	}
	info := nodeInfo("w1", conf, state)
	if info.CapoIPAMInChain == nil || *info.CapoIPAMInChain || info.RuntimeConf != "10-calico.conflist" || info.Wire != wire.Version || len(info.Journal) != 0 {
		t.Fatalf("plain Calico: %+v", info)
	}
	patched, err := install.Patch([]byte(calicoConflist), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(conf, "10-calico.conflist"), patched, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := state.Write(&journal.Record{Version: journal.RecordVersion, Why: "agent away"}); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(state.Root, "pending", "bad.json"), []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	info = nodeInfo("w1", conf, state)
	if info.CapoIPAMInChain == nil || !*info.CapoIPAMInChain || len(info.Journal) != 2 || len(info.Conflists) != 1 {
		t.Fatalf("capo in the chain, two journaled: %+v", info)
	}
	var readable, unreadable int
	for _, e := range info.Journal {
		switch {
		case e.Record != nil && e.Record.Why == "agent away":
			readable++
		case e.Error != "":
			unreadable++
		}
	}
	if readable != 1 || unreadable != 1 {
		t.Fatalf("journal %+v", info.Journal)
	}
	if info := nodeInfo("w1", "", state); info.CapoIPAMInChain != nil || info.Conflists != nil {
		t.Fatalf("without --manage-cni the agent cannot tell: %+v", info)
	}
}

// The handler answers GET only, as JSON.
func TestNodeInfoHandler(t *testing.T) {
	a := &Agent{opts: Options{NodeName: "w1", StateDir: t.TempDir()}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+NodeInfoPath, a.handleNodeInfo)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	resp, err := http.Get(srv.URL + NodeInfoPath)
	if err != nil {
		t.Fatal(err)
	}
	var info NodeInfo
	if err := json.NewDecoder(resp.Body).Decode(&info); err != nil || info.Node != "w1" || info.Journal == nil {
		t.Fatalf("%v %+v", err, info)
	}
	resp.Body.Close()
	if resp, err = http.Post(srv.URL+NodeInfoPath, "application/json", nil); err != nil || resp.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("POST: %v %v", err, resp.StatusCode)
	}
}
