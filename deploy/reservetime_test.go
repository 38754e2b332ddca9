package deploy

import (
	"strings"
	"testing"
	"time"
)

// The chart ships a ceiling on what a tenant's reservation time
// annotation may ask for, that an operator can raise or lift; a default
// reservation time above it stops the render with what to do.
func TestMaxIPReserveTimeShipped(t *testing.T) {
	_, objs := render(t, "capo", "capo-system", nil)
	if got := parsedConfig(t, objs).MaxIPReserveTime; got != 24*time.Hour {
		t.Fatalf("the chart's default ceiling is %s, want 24h", got)
	}
	for values, want := range map[string]time.Duration{"72h": 72 * time.Hour, "": 0} {
		_, objs := render(t, "capo", "capo-system", map[string]any{"config": map[string]any{"maxIPReserveTime": values}})
		if got := parsedConfig(t, objs).MaxIPReserveTime; got != want {
			t.Errorf("maxIPReserveTime %q renders as %s", values, got)
		}
	}
	for ttl, ok := range map[string]bool{"24h": true, "23h59m59s": true, "24h0m1s": false, "90000s": false, "1440m": true, "2.5h": true, "25h": false} {
		_, err := Render("capo", "capo-system", map[string]any{"config": map[string]any{"ipReserveTime": ttl}})
		if ok != (err == nil) || err != nil && !strings.Contains(err.Error(), "config.ipReserveTime "+ttl+" is above config.maxIPReserveTime 24h") {
			t.Errorf("ipReserveTime %s under the default ceiling: %v", ttl, err)
		}
	}
	if _, err := Render("capo", "capo-system", map[string]any{"config": map[string]any{"ipReserveTime": "48h", "maxIPReserveTime": ""}}); err != nil {
		t.Errorf("no ceiling: %v", err)
	}
}
