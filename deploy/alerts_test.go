package deploy

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"sigs.k8s.io/yaml"
)

// The chart's alerts, unit-tested by Prometheus' own promtool as
// kube-prometheus tests its alerts: each one fires on series that should
// fire it and stays quiet on series that should not
// (testdata/alerts-test.yaml). `make unit` builds promtool first.
func TestAlertRules(t *testing.T) {
	rules := renderedRules(t)
	cases, err := os.ReadFile(filepath.Join("testdata", "alerts-test.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	everyAlertFiresAndStaysQuiet(t, rules, cases)

	promtool := promtoolBinary(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "capo-rules.yaml"), rules, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "alerts-test.yaml"), cases, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"check", "rules", "capo-rules.yaml"}, {"test", "rules", "alerts-test.yaml"}} {
		cmd := exec.Command(promtool, args...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("promtool %v: %v\n%s", args, err, out)
		}
	}
}

// renderedRules is the spec of the PrometheusRule the chart renders where
// the API serves it, as a Prometheus rule file.
func renderedRules(t *testing.T) []byte {
	t.Helper()
	_, objs := render(t, "capo", "capo-system", nil, MonitoringAPI...)
	spec := find(t, objs, "PrometheusRule", "capo").Object["spec"]
	b, err := yaml.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// everyAlertFiresAndStaysQuiet holds the test file to its promise: an alert
// added to the chart without a firing and a quiet case fails here.
func everyAlertFiresAndStaysQuiet(t *testing.T, rules, cases []byte) {
	t.Helper()
	var rf struct {
		Groups []struct {
			Rules []struct{ Alert string }
		}
	}
	var tf struct {
		Tests []struct {
			AlertRuleTests []struct {
				Alertname string
				ExpAlerts []any `json:"exp_alerts"`
			} `json:"alert_rule_test"`
		}
	}
	if err := yaml.Unmarshal(rules, &rf); err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(cases, &tf); err != nil {
		t.Fatal(err)
	}
	fires, quiet := map[string]bool{}, map[string]bool{}
	for _, tc := range tf.Tests {
		for _, a := range tc.AlertRuleTests {
			if len(a.ExpAlerts) > 0 {
				fires[a.Alertname] = true
			} else {
				quiet[a.Alertname] = true
			}
		}
	}
	var alerts []string
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			alerts = append(alerts, r.Alert)
			if !fires[r.Alert] {
				t.Errorf("%s: no case where it fires in testdata/alerts-test.yaml", r.Alert)
			}
			if !quiet[r.Alert] {
				t.Errorf("%s: no case where it stays quiet in testdata/alerts-test.yaml", r.Alert)
			}
		}
	}
	for name := range fires {
		if !slices.Contains(alerts, name) {
			t.Errorf("testdata/alerts-test.yaml tests %s, which the chart does not define", name)
		}
	}
}

// promtoolBinary is $CAPO_PROMTOOL (set by `make unit`), or the one `make
// promtool` left in the cache (Debian's, test/tools/promtool/fetch.sh).
func promtoolBinary(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("CAPO_PROMTOOL"); p != "" {
		return p
	}
	cache := os.Getenv("CAPO_TESTBED_CACHE")
	if cache == "" {
		d, err := os.UserCacheDir()
		if err != nil {
			t.Skipf("promtool not fetched and no cache dir (%v): `make unit` fetches it", err)
		}
		cache = filepath.Join(d, "capo-testbed")
	}
	p := filepath.Join(cache, "promtool-deb", "promtool")
	if _, err := os.Stat(p); err != nil {
		t.Skipf("promtool not fetched here: `make promtool` fetches it once from Debian's prometheus package")
	}
	return p
}
