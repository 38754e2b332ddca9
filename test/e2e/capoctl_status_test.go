package e2e

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	capocli "github.com/capo-net/capo/capoctl"
	"github.com/capo-net/capo/test/testbed"
)

// status and bundle against the real API server, Calico's datastore, a
// capo-agent managing the node's CNI config, and a capo-controller: the
// agent is read through the API server's pod proxy, as on a cluster.
func TestCapoctlStatusAndBundle(t *testing.T) {
	eachDatastore(t, func(t *testing.T, ds testbed.Datastore) {
		env := bed.NewEnv(t, ds, testbed.EnvOptions{OptIn: true, NoAgent: true})
		if testbed.HostIP() == "" {
			t.Skip("no global unicast address for the API server's pod proxy to reach the agent")
		}
		node := env.SetupNodeCNI()

		// Nothing runs yet: not fine, and it says what.
		out, code := capoctl(t, env, "", "status", "--node", env.Node)
		if code != 1 || !strings.Contains(out, env.Node+": opted in, but no capo-agent pod runs there") || !strings.Contains(out, "no capo-controller holds the Lease "+env.Namespace+"/capo-controller") {
			t.Fatalf("status with no agent and no controller: exit %d\n%s", code, out)
		}

		a := env.StartAgentWith(testbed.AgentOptions{ManageCNI: node, Reachable: true})
		env.StartController("ctl-" + env.ID)
		out, code = capoctl(t, env, "", "status", "--node", env.Node, "--wait", "--wait-timeout=60s")
		if code != 0 || !strings.Contains(out, "All fine.") || !strings.Contains(out, "leader ctl-"+env.ID) || !strings.Contains(out, "Calico: version v3.31.0") {
			t.Fatalf("status --wait: exit %d\n%s", code, out)
		}
		out, code = capoctl(t, env, "", "status", "--node", env.Node, "-o", "json")
		var r struct {
			OK    bool
			Nodes []struct {
				Node            string
				Ready           bool
				CanReserve      *bool
				CapoIPAMInChain *bool
				WireVersion     int
				JournalDepth    *int
			}
		}
		if err := json.Unmarshal([]byte(out), &r); err != nil || code != 0 || !r.OK || len(r.Nodes) != 1 {
			t.Fatalf("status -o json: exit %d, %v\n%s", code, err, out)
		}
		if n := r.Nodes[0]; !n.Ready || n.CanReserve == nil || !*n.CanReserve || n.CapoIPAMInChain == nil || !*n.CapoIPAMInChain || n.WireVersion == 0 || n.JournalDepth == nil || *n.JournalDepth != 0 {
			t.Fatalf("node status %+v\n%s", n, out)
		}
		if out, code = capoctl(t, env, "", "version", "-o", "json"); code != 0 || !strings.Contains(out, `"`+env.Node+`": "`) || !strings.Contains(out, `"version": "v3.31.0"`) {
			t.Fatalf("version: exit %d\n%s", code, out)
		}

		file := filepath.Join(t.TempDir(), "bundle.tar.gz")
		if out, code = capoctl(t, env, "", "bundle", "-f", file); code != 0 || !strings.Contains(out, "wrote "+file) {
			t.Fatalf("bundle: exit %d\n%s", code, out)
		}
		files := untar(t, file)
		for name, want := range map[string]string{
			"status.json": `"agent": "capo-agent-` + env.ID + `"`,
			"nodes/" + env.Node + "/cni/10-calico.conflist": "capo-ipam",
			"nodes/" + env.Node + "/journal.json":           "[]",
			"nodes/" + env.Node + "/agent-metrics.txt":      "capo_agent_can_reserve 1",
			"kubernetes/" + env.Namespace + "/leases.yaml":  "holderIdentity: ctl-" + env.ID,
			"calico/clusterinformation.yaml":                "v3.31.0",
			"calico/ippools.yaml":                           "cidr:",
			"errors.txt":                                    "", // the bed has no kubelet: logs are listed as not collected
		} {
			got, ok := files["bundle/"+name]
			if !ok || !strings.Contains(got, want) {
				t.Errorf("bundle's %s (present %v) lacks %q:\n%s", name, ok, want, got)
			}
		}

		// The agent stops: its pod turns NotReady, and status says so.
		a.Stop()
		if out, code = capoctl(t, env, "", "status", "--node", env.Node); code != 1 || !strings.Contains(out, "is not Ready") {
			t.Fatalf("status with the agent stopped: exit %d\n%s", code, out)
		}
	})
}

func untar(t *testing.T, file string) map[string]string {
	t.Helper()
	files, err := capocli.ReadBundle(file)
	if err != nil {
		t.Fatal(err)
	}
	return files
}
