package deploy

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Every capo metric the alerts and the dashboard query is one the daemons
// export, under the one prefix of its component: a metric renamed in
// daemon/*/metrics.go and left here would leave a panel empty and an
// alert silent, which no one notices until it should have fired.
func TestAlertsAndDashboardNameExportedMetrics(t *testing.T) {
	exported := map[string]bool{"capo_build_info": true}
	prefix := map[string]string{"agent": "capo_agent_", "controller": "capo_controller_"}
	for component, want := range prefix {
		src, err := os.ReadFile(filepath.Join(filepath.Dir(ChartDir()), "..", "..", "daemon", component, "metrics.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range regexp.MustCompile(`Name:\s+"(capo_[a-z_]+)"`).FindAllStringSubmatch(string(src), -1) {
			exported[m[1]] = true
			if !strings.HasPrefix(m[1], want) {
				t.Errorf("daemon/%s/metrics.go: %s does not start with %s", component, m[1], want)
			}
		}
	}
	_, objs := render(t, "capo", "capo-system", nil, MonitoringAPI...)
	board, _, _ := unstructured.NestedString(find(t, objs, "ConfigMap", "capo-grafana-dashboard").Object, "data", "capo.json")
	for what, text := range map[string]string{"the alerts": string(renderedRules(t)), "the dashboard": board} {
		for _, name := range regexp.MustCompile(`\bcapo_[a-z_]+`).FindAllString(text, -1) {
			base := regexp.MustCompile(`_(bucket|sum|count)$`).ReplaceAllString(name, "")
			if !exported[name] && !exported[base] {
				t.Errorf("%s query %s, which no daemon exports", what, name)
			}
		}
	}
}

// Every alert links its runbook: a section of docs/runbooks.md named after
// it, which exists.
func TestEveryAlertHasARunbook(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join(filepath.Dir(ChartDir()), "..", "..", "docs", "runbooks.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, objs := render(t, "capo", "capo-system", nil, MonitoringAPI...)
	groups, _, _ := unstructured.NestedSlice(find(t, objs, "PrometheusRule", "capo").Object, "spec", "groups")
	n := 0
	for _, g := range groups {
		for _, r := range g.(map[string]any)["rules"].([]any) {
			rule := r.(map[string]any)
			name, _ := rule["alert"].(string)
			if name == "" {
				continue
			}
			n++
			url, _ := rule["annotations"].(map[string]any)["runbook_url"].(string)
			if want := "https://github.com/capo-net/capo/blob/main/docs/runbooks.md#" + strings.ToLower(name); url != want {
				t.Errorf("%s: runbook_url %q, want %q", name, url, want)
			}
			if !strings.Contains(string(doc), "\n## "+name+"\n") {
				t.Errorf("docs/runbooks.md has no section ## %s", name)
			}
		}
	}
	if n < 10 {
		t.Errorf("only %d alerts", n)
	}
}
