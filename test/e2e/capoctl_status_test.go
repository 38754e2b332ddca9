package e2e

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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

		// What the agent serves beside /metrics, to anything on the node
		// network, is a summary: no conflist, no journal.
		summary := httpGet(t, "http://"+a.MetricsAddr+"/debug/capo/node")
		if strings.Contains(summary, "k8s-pod-network") || strings.Contains(summary, "capo-ipam\"") || !strings.Contains(summary, `"capoIPAMInChain":true`) {
			t.Fatalf("the node summary beside /metrics:\n%s", summary)
		}

		// A token and a private key planted in a CNI config on the node and
		// in ConfigMaps of capo's namespace, capo's own and another's.
		plantSecrets(t, env, node.ConfDir)
		file := filepath.Join(t.TempDir(), "bundle.tar.gz")
		if out, code = capoctl(t, env, "", "bundle", "-f", file); code != 0 || !strings.Contains(out, "wrote "+file) {
			t.Fatalf("bundle: exit %d\n%s", code, out)
		}
		files := untar(t, file)
		for name, want := range map[string]string{
			"status.json": `"agent": "capo-agent-` + env.ID + `"`,
			"nodes/" + env.Node + "/agent-metrics.txt":         "capo_agent_can_reserve 1",
			"kubernetes/" + env.Namespace + "/leases.yaml":     "holderIdentity: ctl-" + env.ID,
			"kubernetes/" + env.Namespace + "/configmaps.yaml": "capo-release",
			"calico/clusterinformation.yaml":                   "v3.31.0",
			"calico/ippools.yaml":                              "cidr:",
			"errors.txt":                                       "capo-agent node-info (pods/exec", // the bed has no kubelet to exec in
		} {
			got, ok := files["bundle/"+name]
			if !ok || !strings.Contains(got, want) {
				t.Errorf("bundle's %s (present %v) lacks %q:\n%s", name, ok, want, got)
			}
		}
		for name, data := range files {
			for _, secret := range plantedSecrets {
				if strings.Contains(data, secret) {
					t.Errorf("bundle's %s holds the planted %q", name, secret)
				}
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

// plantedSecrets are what plantSecrets puts where a bundle could reach.
var plantedSecrets = []string{"planted-token-6a1f", "MIIplantedKeyMaterial", "not capo's"}

// plantSecrets writes a CNI config holding a token and a private key into
// the node's conf dir (after Calico's, so the runtime never uses it), and
// ConfigMaps into capo's namespace: capo's release requests with the same,
// and one that is not capo's.
func plantSecrets(t *testing.T, env *testbed.Env, confDir string) {
	t.Helper()
	key := `-----BEGIN RSA PRIVATE KEY-----\nMIIplantedKeyMaterial\n-----END RSA PRIVATE KEY-----`
	conf := `{"name":"old-calico","cniVersion":"0.3.1","plugins":[{"type":"calico","policy":{"type":"k8s","k8s_auth_token":"planted-token-6a1f"},"etcd_key":"` + key + `"}]}`
	if err := os.WriteFile(filepath.Join(confDir, "90-planted.conflist"), []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for name, data := range map[string]string{"capo-release": "token: planted-token-6a1f\nkey: |\n  " + strings.ReplaceAll(key, `\n`, "\n  "), "coredns": "not capo's"} {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: env.Namespace}, Data: map[string]string{"note": data}}
		if _, err := env.Bed.Kube.CoreV1().ConfigMaps(env.Namespace).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

func httpGet(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
