package deploy

import (
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/capo-net/capo/pkg/config"
)

// values.schema.json turns a typo or a wrong type into a failed install
// instead of a value silently ignored.
func TestSchemaRejectsBadValues(t *testing.T) {
	for name, tc := range map[string]struct {
		values map[string]any
		want   string
	}{
		"top-level typo":              {map[string]any{"imag": map[string]any{"tag": "v1"}}, "imag"},
		"nested typo":                 {map[string]any{"config": map[string]any{"ipReserveTim": "1h"}}, "ipReserveTim"},
		"agent typo":                  {map[string]any{"agent": map[string]any{"podAnnotation": map[string]any{"a": "b"}}}, "podAnnotation"},
		"wrong type":                  {map[string]any{"controller": map[string]any{"replicas": "two"}}, "replicas"},
		"not a duration":              {map[string]any{"config": map[string]any{"ipReserveTime": "40 minutes"}}, "ipReserveTime"},
		"cap not a duration":          {map[string]any{"config": map[string]any{"maxIPReserveTime": "a day"}}, "maxIPReserveTime"},
		"unknown mode":                {map[string]any{"config": map[string]any{"returnAddress": "sometimes"}}, "returnAddress"},
		"unknown datastore":           {map[string]any{"datastore": map[string]any{"type": "etcd"}}, "type"},
		"unknown Calico API group":    {map[string]any{"datastore": map[string]any{"calicoAPIGroup": "projectcalico.org/v1"}}, "calicoAPIGroup"},
		"env without a name":          {map[string]any{"agent": map[string]any{"extraEnv": []any{map[string]any{"value": "1"}}}}, "name"},
		"label not a string":          {map[string]any{"controller": map[string]any{"podLabels": map[string]any{"tier": 1}}}, "tier"},
		"selector typo":               {map[string]any{"config": map[string]any{"podSelectors": []any{map[string]any{"matchLabel": map[string]any{"app": "zk"}}}}}, "matchLabel"},
		"owner kind without resource": {map[string]any{"config": map[string]any{"ownerKinds": []any{map[string]any{"group": "example.com", "version": "v1", "kind": "Broker"}}}}, "resource"},
		"ratio out of bounds":         {map[string]any{"metrics": map[string]any{"prometheusRule": map[string]any{"nearMaxRatio": 2}}}, "nearMaxRatio"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Render("capo", "capo-system", tc.values)
			if err == nil {
				t.Fatalf("values %v rendered", tc.values)
			}
			if !strings.Contains(err.Error(), "schema") || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error does not name the schema and %q: %v", tc.want, err)
			}
		})
	}
}

// Every key of the CapoConfig is rendered from its value: with every value
// away from capo's default, no field of the parsed config keeps its default.
func TestEveryConfigKeyRendered(t *testing.T) {
	_, objs := render(t, "capo", "capo-system", map[string]any{"config": map[string]any{
		"ipReserveTime": "2h", "maxIPReserveTime": "48h", "ipReserveMaxCount": 7, "ipReleasePeriod": "9s",
		"labelSelector":  map[string]any{"matchLabels": map[string]any{"tier": "db"}},
		"podSelectors":   []any{map[string]any{"matchLabels": map[string]any{"app": "zk"}}},
		"reserveTimeout": "3s", "deletedPodMemory": "1h", "returnAddress": "anyNode",
		"ownerKinds": []any{map[string]any{"group": "example.com", "version": "v1", "kind": "Broker", "resource": "brokers"}},
	}})
	got := parsedConfig(t, objs)
	d, g := reflect.ValueOf(*config.Default()), reflect.ValueOf(*got)
	for i := range d.NumField() {
		if reflect.DeepEqual(d.Field(i).Interface(), g.Field(i).Interface()) {
			t.Errorf("config field %s kept its default: its chart value is not rendered", d.Type().Field(i).Name)
		}
	}
}

func TestReturnAddressRendered(t *testing.T) {
	for in, want := range map[any]config.ReturnMode{
		"off": config.ReturnOff, false: config.ReturnOff, "anyNode": config.ReturnAnyNode, "sameNode": config.ReturnSameNode,
	} {
		_, objs := render(t, "capo", "capo-system", map[string]any{"config": map[string]any{"returnAddress": in}})
		if got := parsedConfig(t, objs).ReturnAddress; got != want {
			t.Errorf("returnAddress %v renders as %q, want %q", in, got, want)
		}
	}
}

// datastore.calicoAPIGroup is CALICO_API_GROUP for both workloads, as
// calico-node is told after Calico's migration; unset, neither has it.
func TestCalicoAPIGroupRendered(t *testing.T) {
	for _, group := range []string{"", "projectcalico.org/v3"} {
		_, objs := render(t, "capo", "capo-system", map[string]any{"datastore": map[string]any{"calicoAPIGroup": group}})
		for _, w := range [][2]string{{"DaemonSet", "capo-agent"}, {"Deployment", "capo-controller"}} {
			containers, _, _ := unstructured.NestedSlice(find(t, objs, w[0], w[1]).Object, "spec", "template", "spec", "containers")
			got := ""
			env, _, _ := unstructured.NestedSlice(containers[0].(map[string]any), "env")
			for _, e := range env {
				if e, _ := e.(map[string]any); e["name"] == "CALICO_API_GROUP" {
					got, _ = e["value"].(string)
				}
			}
			if got != group {
				t.Errorf("%s with calicoAPIGroup %q: CALICO_API_GROUP %q", w[1], group, got)
			}
		}
	}
}

func parsedConfig(t *testing.T, objs []*unstructured.Unstructured) *config.Config {
	t.Helper()
	data, _, _ := unstructured.NestedString(find(t, objs, "ConfigMap", "capo-config").Object, "data", "config.yaml")
	c, err := config.Parse([]byte(data))
	if err != nil {
		t.Fatalf("rendered config: %v\n%s", err, data)
	}
	return c
}

// capo-controller may get, list and watch Kruise's Advanced StatefulSets
// and every listed owner kind: a kind it cannot watch is never judged
// gone, and a release judged by an owner or a namespace is confirmed with
// a get of it.
func TestOwnerKindsGranted(t *testing.T) {
	_, objs := render(t, "capo", "capo-system", map[string]any{"config": map[string]any{
		"ownerKinds": []any{map[string]any{"group": "example.com", "version": "v1", "kind": "Broker", "resource": "brokers"}},
	}})
	rules, _, _ := unstructured.NestedSlice(find(t, objs, "ClusterRole", "capo-controller").Object, "rules")
	granted := map[string]string{}
	for _, r := range rules {
		m := r.(map[string]any)
		var verbs []string
		for _, v := range m["verbs"].([]any) {
			verbs = append(verbs, v.(string))
		}
		for _, g := range m["apiGroups"].([]any) {
			for _, res := range m["resources"].([]any) {
				granted[g.(string)+"/"+res.(string)] = strings.Join(verbs, ",")
			}
		}
	}
	for _, want := range []string{"apps/statefulsets", "apps/replicasets", "apps/deployments", "/namespaces", "apps.kruise.io/statefulsets", "example.com/brokers"} {
		if granted[want] != "get,list,watch" {
			t.Errorf("capo-controller is granted %q on %s, want get, list and watch: %v", granted[want], want, granted)
		}
	}
}
