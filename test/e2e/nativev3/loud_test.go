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
// decides v3 as Calico does, and refuses it loudly (this build reads
// Calico's IPAM only in crd.projectcalico.org/v1); forced to v1, it names
// the types that are not served. Before, the agent reported Ready and the
// controller read empty views.
func TestNewInstallIsRefusedLoudly(t *testing.T) {
	env := bed.NewEnv(t, testbed.Kubernetes, testbed.EnvOptions{OptIn: true, NoAgent: true})
	n := env.SetupNodeCNI()
	for _, c := range []struct {
		env          []string
		group, words string
	}{
		{nil, "projectcalico.org/v3", "projectcalico.org/v3 (from discovery)"},
		{[]string{"CALICO_API_GROUP=crd.projectcalico.org/v1"}, "crd.projectcalico.org/v1", "not served in API group crd.projectcalico.org/v1: ipreservations, ipamblocks"},
	} {
		a := env.StartAgentWith(testbed.AgentOptions{Env: c.env, NotReady: true})
		a.WaitMetric(1, "capo_agent_not_ready", `reason="calico-api"`)
		a.WaitMetric(1, "capo_calico_api_info", `group="`+c.group+`"`)
		eventually(t, 20*time.Second, "the agent's /readyz naming the group", func() bool {
			code, body := a.Readyz()
			return code == http.StatusServiceUnavailable && strings.Contains(body, c.words)
		})
		a.Stop()

		ctl := env.StartControllerWith("c-"+c.group[:3], testbed.AgentOptions{Env: c.env, NotReady: true})
		eventually(t, 20*time.Second, "the controller's /readyz naming the group", func() bool {
			code, body := ctl.Readyz()
			return code == http.StatusServiceUnavailable && strings.Contains(body, c.words)
		})
		ctl.Stop()

		if out, code := env.Capoctl(c.env, "list"); code == 0 || !strings.Contains(out, c.words) {
			t.Fatalf("capoctl list: exit %d\n%s", code, out)
		}
		if out, code := env.InstallCheck(n, c.env...); code != 1 || !strings.Contains(out, c.words) {
			t.Fatalf("capo-install check: exit %d\n%s", code, out)
		}
	}
}

// The etcdv3 datastore does not depend on the API group: capo works there
// as before on the same cluster.
func TestEtcdDatastoreIsUnchanged(t *testing.T) {
	env := bed.NewEnv(t, testbed.Etcd, testbed.EnvOptions{OptIn: true})
	env.Agent.WaitMetric(1, "capo_calico_api_info", `group="none"`, `source="etcdv3"`)
}
