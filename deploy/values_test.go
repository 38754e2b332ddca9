package deploy

import (
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/capo-net/capo/pkg/config"
)

// Every key of the CapoConfig is rendered from its value: with every value
// away from capo's default, no field of the parsed config keeps its default.
func TestEveryConfigKeyRendered(t *testing.T) {
	_, objs := render(t, "capo", "capo-system", map[string]any{"config": map[string]any{
		"ipReserveTime": "2h", "ipReserveMaxCount": 7, "ipReleasePeriod": "9s",
		"labelSelector":  map[string]any{"matchLabels": map[string]any{"tier": "db"}},
		"podSelectors":   []any{map[string]any{"matchLabels": map[string]any{"app": "zk"}}},
		"reserveTimeout": "3s", "deletedPodMemory": "1h", "returnAddress": "anyNode",
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

func parsedConfig(t *testing.T, objs []*unstructured.Unstructured) *config.Config {
	t.Helper()
	data, _, _ := unstructured.NestedString(find(t, objs, "ConfigMap", "capo-config").Object, "data", "config.yaml")
	c, err := config.Parse([]byte(data))
	if err != nil {
		t.Fatalf("rendered config: %v\n%s", err, data)
	}
	return c
}
