package deploy

import (
	"fmt"
	"strings"
	"testing"
)

// The agent's probes use its loopback health port, liveness on /livez
// with room to ride out a slow moment; /metrics keeps its address,
// configurable.
func TestAgentProbesOnLoopback(t *testing.T) {
	for _, tc := range []struct {
		values  map[string]any
		metrics string
		health  string
	}{
		{nil, "--metrics-addr=:9467", "--health-addr=127.0.0.1:9469"},
		{map[string]any{"agent": map[string]any{"metricsBindAddress": "127.0.0.1", "metricsPort": 9500, "healthPort": 9501}}, "--metrics-addr=127.0.0.1:9500", "--health-addr=127.0.0.1:9501"},
	} {
		_, objs := render(t, "capo", "capo-system", tc.values)
		c := nested(t, find(t, objs, "DaemonSet", "capo-agent"), "spec", "template", "spec")["containers"].([]any)[0].(map[string]any)
		args := " " + strings.Join(toStrings(c["args"]), " ") + " "
		if !strings.Contains(args, " "+tc.metrics+" ") || !strings.Contains(args, " "+tc.health+" ") {
			t.Errorf("%v: args %s", tc.values, args)
		}
		port := tc.health[strings.LastIndex(tc.health, ":")+1:]
		for probe, path := range map[string]string{"livenessProbe": "/livez", "readinessProbe": "/readyz"} {
			p := c[probe].(map[string]any)
			get := p["httpGet"].(map[string]any)
			if get["host"] != "127.0.0.1" || get["path"] != path || toString(get["port"]) != port {
				t.Errorf("%v: %s %v", tc.values, probe, get)
			}
		}
		if live := c["livenessProbe"].(map[string]any); toString(live["failureThreshold"]) != "6" {
			t.Errorf("liveness failureThreshold %v", live["failureThreshold"])
		}
	}
}

// toString prints a rendered scalar, whatever number type YAML gave it.
func toString(v any) string { return fmt.Sprint(v) }
