package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/projectcalico/calico/libcalico-go/lib/options"

	"github.com/capo-net/capo/pkg/calico/apigroup"
	"github.com/capo-net/capo/pkg/calico/client"
	"github.com/capo-net/capo/test/testbed"
)

// The bed serves Calico's crd.projectcalico.org/v1 CRDs only. Told that
// Calico uses projectcalico.org/v3 (CALICO_API_GROUP, as in Calico's
// migration window), every capo component refuses loudly, naming the
// group: where the agent used to stay ready and "reserve" in v1, which
// Calico no longer reads, and capoctl printed an empty list.
func TestCalicoTypesNotServedAreLoud(t *testing.T) {
	v3 := []string{"CALICO_API_GROUP=projectcalico.org/v3"}
	env := bed.NewEnv(t, testbed.Kubernetes, testbed.EnvOptions{OptIn: true})
	env.Agent.WaitMetric(1, "capo_calico_api_info", `group="crd.projectcalico.org/v1"`, `source="discovery"`)
	env.Agent.Stop()

	a := env.StartAgentWith(testbed.AgentOptions{Env: v3, NotReady: true})
	a.WaitMetric(1, "capo_agent_not_ready", `reason="calico-api"`)
	a.WaitMetric(1, "capo_calico_api_info", `group="projectcalico.org/v3"`, `source="env"`)
	eventually(t, 20*time.Second, "the agent's /readyz naming the group", func() bool {
		code, body := a.Readyz()
		return code == http.StatusServiceUnavailable && strings.Contains(body, "not served in API group projectcalico.org/v3: ipreservations")
	})
	// It stays so: nothing it could write would be read by Calico.
	time.Sleep(3 * time.Second)
	if code, _ := a.Readyz(); code != http.StatusServiceUnavailable {
		t.Fatalf("agent turned ready: %d", code)
	}

	c := env.StartControllerWith("c1", testbed.AgentOptions{Env: v3, NotReady: true})
	eventually(t, 20*time.Second, "the controller's /readyz naming the group", func() bool {
		code, body := c.Readyz()
		return code == http.StatusServiceUnavailable && strings.Contains(body, "projectcalico.org/v3")
	})

	out, code := env.Capoctl(v3, "list")
	if code == 0 || !strings.Contains(out, "ipreservations") || !strings.Contains(out, "projectcalico.org/v3") {
		t.Fatalf("capoctl list: exit %d\n%s", code, out)
	}
	n := env.SetupNodeCNI()
	if out, code := env.InstallCheck(n, v3...); code != 1 || !strings.Contains(out, "not served in API group projectcalico.org/v3") {
		t.Fatalf("capo-install check: exit %d\n%s", code, out)
	}
	if out, code := env.InstallCheck(n); code != 0 || !strings.Contains(out, `"Group": "crd.projectcalico.org/v1"`) {
		t.Fatalf("capo-install check in v1: exit %d\n%s", code, out)
	}
}

// Against the real API server, a 404 for a type that is not served names
// no object: capo's v3 client reads it as "not served", never "absent".
func TestV3ClientWhereV3IsNotServed(t *testing.T) {
	objs, err := client.New(bed.REST)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := objs.Get(ctx, "capo-bucket-0", options.GetOptions{}); !apigroup.IsNotServed(err) {
		t.Fatalf("get: %v", err)
	}
	if _, err := objs.List(ctx, options.ListOptions{}); !apigroup.IsNotServed(err) {
		t.Fatalf("list: %v", err)
	}
}

// The migration window as Calico's operator sets it: both groups served,
// calico_api_group: projectcalico.org/v3 in the calico plugin's config.
// The agent reads it from the node's conflist, as calico-ipam does, and
// refuses (here v3 is not served at all), where it used to stay ready and
// reserve in crd.projectcalico.org/v1.
func TestAgentFollowsTheConflistsCalicoAPIGroup(t *testing.T) {
	env := bed.NewEnv(t, testbed.Kubernetes, testbed.EnvOptions{OptIn: true, NoAgent: true})
	n := env.SetupNodeCNI()
	n.Original = withAPIGroup(t, n.Original, "projectcalico.org/v3")
	n.CalicoNodeRewrites(env)
	a := env.StartAgentWith(testbed.AgentOptions{ManageCNI: n, NotReady: true})
	a.WaitMetric(1, "capo_calico_api_info", `group="projectcalico.org/v3"`, `source="netconf"`)
	a.WaitMetric(1, "capo_agent_not_ready", `reason="calico-api"`)
	eventually(t, 20*time.Second, "the agent's /readyz naming the group", func() bool {
		code, body := a.Readyz()
		return code == http.StatusServiceUnavailable && strings.Contains(body, "projectcalico.org/v3")
	})
	if out, code := env.InstallCheck(n); code != 1 || !strings.Contains(out, `"Source": "netconf"`) {
		t.Fatalf("capo-install check: exit %d\n%s", code, out)
	}
	// A selected pod's teardown meanwhile: journaled, its address kept
	// allocated, never released on the agent's empty answer.
	env.Agent = a
	sb := env.AddPods("kafka", 1, env.Conflist(testbed.Capo), testbed.StatefulPod("kafka"))[0]
	env.Evict(sb.Pod.Name)
	if err := sb.Del(context.Background()); err != nil {
		t.Fatalf("DEL must not block teardown: %v", err)
	}
	if !env.Allocated(sb.IPs[0]) {
		t.Fatal("the address was released while the agent could not use Calico's group")
	}
	if pending, _ := env.Journal().Pending(); len(pending) != 1 {
		t.Fatalf("journal holds %d records, want 1", len(pending))
	}
}

// Calico switched to projectcalico.org/v3 on a running node (calico-node
// rewrites the conflist with calico_api_group): calico-ipam follows at its
// next call, so the agent must stop being ready, naming the mismatch.
func TestAgentNoticesTheNodeSwitchingGroups(t *testing.T) {
	env := bed.NewEnv(t, testbed.Kubernetes, testbed.EnvOptions{OptIn: true, NoAgent: true})
	n := env.SetupNodeCNI()
	a := env.StartAgentWith(testbed.AgentOptions{ManageCNI: n})
	a.WaitMetric(1, "capo_calico_api_info", `group="crd.projectcalico.org/v1"`, `source="discovery"`)
	n.Original = withAPIGroup(t, n.Original, "projectcalico.org/v3")
	n.CalicoNodeRewrites(env)
	eventually(t, 30*time.Second, "the agent's /readyz naming the switch", func() bool {
		code, body := a.Readyz()
		return code == http.StatusServiceUnavailable && strings.Contains(body, "calico_api_group on this node is projectcalico.org/v3")
	})
}

// withAPIGroup is conflist with calico_api_group set in its calico plugin,
// as Calico's operator writes it.
func withAPIGroup(t *testing.T, conflist []byte, group string) []byte {
	t.Helper()
	var conf struct {
		Rest    map[string]json.RawMessage
		Plugins []map[string]any `json:"plugins"`
	}
	if err := json.Unmarshal(conflist, &conf.Rest); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(conf.Rest["plugins"], &conf.Plugins); err != nil {
		t.Fatal(err)
	}
	for _, pl := range conf.Plugins {
		if pl["type"] == "calico" {
			pl["calico_api_group"] = group
		}
	}
	plugins, err := json.Marshal(conf.Plugins)
	if err != nil {
		t.Fatal(err)
	}
	conf.Rest["plugins"] = plugins
	out, err := json.MarshalIndent(conf.Rest, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return out
}
