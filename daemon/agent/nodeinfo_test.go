package agent

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
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

// A conflist in an old Calico manifest's shape: a token, and an etcd key's
// path beside inline key data.
const secretConflist = `{"name":"k8s-pod-network","cniVersion":"0.3.1","plugins":[{"type":"calico",
"etcd_key_file":"/calico-secrets/etcd-key","policy":{"type":"k8s","k8s_auth_token":"planted-token"},
"etcd_key":"-----BEGIN EC PRIVATE KEY-----\nplanted-key\n-----END EC PRIVATE KEY-----",
"ipam":{"type":"calico-ipam"}}]}`

// plantSecrets writes secretConflist and a journaled DEL carrying it.
func plantSecrets(t *testing.T) (conf string, state journal.Dir) {
	t.Helper()
	conf, state = t.TempDir(), journal.Dir{Root: t.TempDir()}
	if err := os.WriteFile(filepath.Join(conf, "10-calico.conflist"), []byte(secretConflist), 0o600); err != nil {
		t.Fatal(err)
	}
	rec := &journal.Record{Version: journal.RecordVersion, Why: "agent away", Netconf: []byte(`{"type":"calico","policy":{"k8s_auth_token":"planted-token"}}`)}
	rec.Env = map[string]string{"CNI_ARGS": "K8S_POD_NAME=db-0;TOKEN=planted-token"}
	if _, err := state.Write(rec); err != nil {
		t.Fatal(err)
	}
	return conf, state
}

// The summary beside /metrics, where every pod on the node network reaches
// it, holds no file's content and no journaled netconf, only what status
// reads: it answers GET only, as JSON, from a cache.
func TestNodeSummaryHoldsNoContent(t *testing.T) {
	conf, state := plantSecrets(t)
	a := &Agent{opts: Options{NodeName: "w1", StateDir: state.Root, CNIConfDir: conf}}
	mux := http.NewServeMux()
	mux.Handle("GET "+NodeInfoPath, a.nodeSummary())
	srv := httptest.NewServer(mux)
	defer srv.Close()
	body := get(t, srv.URL+NodeInfoPath)
	for _, leak := range []string{"planted", "k8s-pod-network", "etcd-key", "db-0", "agent away"} {
		if strings.Contains(body, leak) {
			t.Errorf("the summary holds %q:\n%s", leak, body)
		}
	}
	var info NodeInfo
	if err := json.Unmarshal([]byte(body), &info); err != nil || info.Node != "w1" || info.JournalDepth != 1 || info.RuntimeConf != "10-calico.conflist" || info.CapoIPAMInChain == nil || *info.CapoIPAMInChain {
		t.Fatalf("%v %+v", err, info)
	}
	if err := os.RemoveAll(filepath.Join(state.Root, "pending")); err != nil {
		t.Fatal(err)
	}
	if again := get(t, srv.URL+NodeInfoPath); again != body {
		t.Errorf("read again inside %s: %s", nodeSummaryTTL, again)
	}
	if resp, err := http.Post(srv.URL+NodeInfoPath, "application/json", nil); err != nil || resp.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("POST: %v %v", err, resp.StatusCode)
	}
}

// The full view (the node-info command capoctl bundle runs through
// pods/exec) shows the conflists and journal with their secrets redacted,
// file paths kept.
func TestNodeInfoRedacted(t *testing.T) {
	conf, state := plantSecrets(t)
	var out strings.Builder
	if err := WriteNodeInfo(&out, Options{NodeName: "w1", StateDir: state.Root, CNIConfDir: conf}); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	if strings.Contains(got, "planted") || strings.Contains(got, "BEGIN EC") {
		t.Errorf("a secret in the node view:\n%s", got)
	}
	for _, kept := range []string{`\"/calico-secrets/etcd-key\"`, "k8s-pod-network", "K8S_POD_NAME=db-0", "agent away", `"k8s_auth_token": "<redacted>"`} {
		if !strings.Contains(got, kept) {
			t.Errorf("%s lost:\n%s", kept, got)
		}
	}
}

func get(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("GET %s: %d %v", url, resp.StatusCode, err)
	}
	return string(b)
}
