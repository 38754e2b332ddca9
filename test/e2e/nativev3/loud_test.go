package nativev3

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/capo-net/capo/test/testbed"
)

func eventually(t *testing.T, limit time.Duration, what string, ok func() bool) {
	t.Helper()
	testbed.Eventually(t, limit, what, ok)
}

// A new install: only projectcalico.org/v3 is served. Every component
// decides v3 as Calico does and works there (every Calico resource capo
// uses goes through its own v3 client); forced to v1, it refuses loudly,
// naming the types that are not served. Before, the agent reported Ready
// and the controller read empty views in v1.
func TestNewInstallWorksInV3AndV1IsRefusedLoudly(t *testing.T) {
	env := bed.NewEnv(t, testbed.Kubernetes, testbed.EnvOptions{OptIn: true, NoAgent: true})
	n := env.SetupNodeCNI()

	a := env.StartAgentWith(testbed.AgentOptions{})
	a.WaitMetric(1, "capo_calico_api_info", `group="projectcalico.org/v3"`, `source="discovery"`)
	if code, body := a.Readyz(); code != http.StatusOK {
		t.Fatalf("the agent in v3: /readyz %d %s", code, body)
	}
	a.Stop()
	ctl := env.StartControllerWith("c-v3", testbed.AgentOptions{})
	eventually(t, 20*time.Second, "the controller ready in v3", func() bool {
		code, _ := ctl.Readyz()
		return code == http.StatusOK
	})
	ctl.Stop()
	if out, code := env.Capoctl(nil, "list"); code != 0 {
		t.Fatalf("capoctl list in v3: exit %d\n%s", code, out)
	}
	if out, code := env.InstallCheck(n); code != 0 || !strings.Contains(out, `"Group": "projectcalico.org/v3"`) {
		t.Fatalf("capo-install check in v3: exit %d\n%s", code, out)
	}

	v1 := []string{"CALICO_API_GROUP=crd.projectcalico.org/v1"}
	words := "not served in API group crd.projectcalico.org/v1: ipreservations, ipamblocks"
	a = env.StartAgentWith(testbed.AgentOptions{Env: v1, NotReady: true})
	a.WaitMetric(1, "capo_agent_not_ready", `reason="calico-api"`)
	a.WaitMetric(1, "capo_calico_api_info", `group="crd.projectcalico.org/v1"`)
	eventually(t, 20*time.Second, "the agent's /readyz naming the group", func() bool {
		code, body := a.Readyz()
		return code == http.StatusServiceUnavailable && strings.Contains(body, words)
	})
	a.Stop()
	ctl = env.StartControllerWith("c-v1", testbed.AgentOptions{Env: v1, NotReady: true})
	eventually(t, 20*time.Second, "the controller's /readyz naming the group", func() bool {
		code, body := ctl.Readyz()
		return code == http.StatusServiceUnavailable && strings.Contains(body, words)
	})
	ctl.Stop()
	if out, code := env.Capoctl(v1, "list"); code == 0 || !strings.Contains(out, words) {
		t.Fatalf("capoctl list: exit %d\n%s", code, out)
	}
	if out, code := env.InstallCheck(n, v1...); code != 1 || !strings.Contains(out, words) {
		t.Fatalf("capo-install check: exit %d\n%s", code, out)
	}
}

// The etcdv3 datastore does not depend on the API group: capo works there
// as before on the same cluster.
func TestEtcdDatastoreIsUnchanged(t *testing.T) {
	env := bed.NewEnv(t, testbed.Etcd, testbed.EnvOptions{OptIn: true})
	env.Agent.WaitMetric(1, "capo_calico_api_info", `group="none"`, `source="etcdv3"`)
}
