package deploy

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"sigs.k8s.io/yaml"
)

// The chart's README documents every key of values.yaml, down to the keys
// whose content values.schema.json leaves free (resources, affinity, ...).
func TestChartReadmeDocumentsEveryValue(t *testing.T) {
	var values map[string]any
	var schema map[string]any
	for file, v := range map[string]any{"values.yaml": &values, "values.schema.json": &schema} {
		b, err := os.ReadFile(filepath.Join(ChartDir(), file))
		if err != nil {
			t.Fatal(err)
		}
		if err := yaml.Unmarshal(b, v); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
	}
	readme, err := os.ReadFile(filepath.Join(ChartDir(), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	keys := documentedKeys(values, schema, "")
	if len(keys) < 50 {
		t.Fatalf("only %d keys found in values.yaml", len(keys))
	}
	for _, k := range keys {
		if !strings.Contains(string(readme), "| `"+k+"` |") {
			t.Errorf("README.md has no row for `%s`", k)
		}
	}
}

// documentedKeys walks values as the schema describes them: a key whose
// schema lists properties is walked into, any other is one row.
func documentedKeys(values, schema map[string]any, prefix string) []string {
	props, _ := schema["properties"].(map[string]any)
	var out []string
	for k, v := range values {
		sub, _ := props[k].(map[string]any)
		vm, isMap := v.(map[string]any)
		if _, walk := sub["properties"]; walk && isMap {
			out = append(out, documentedKeys(vm, sub, prefix+k+".")...)
			continue
		}
		out = append(out, prefix+k)
	}
	slices.Sort(out)
	return out
}

// NOTES.txt renders with the release's namespace and tells how to meet
// the agent's Pod Security need.
func TestNotes(t *testing.T) {
	c, err := LoadChart()
	if err != nil {
		t.Fatal(err)
	}
	vals, err := chartutil.ToRenderValues(c, nil, chartutil.ReleaseOptions{Name: "capo", Namespace: "net-x", IsInstall: true}, chartutil.DefaultCapabilities)
	if err != nil {
		t.Fatal(err)
	}
	files, err := engine.Render(c, vals)
	if err != nil {
		t.Fatal(err)
	}
	notes := files["capo/templates/NOTES.txt"]
	if !strings.Contains(notes, "kubectl label namespace net-x pod-security.kubernetes.io/enforce=privileged") {
		t.Errorf("NOTES.txt:\n%s", notes)
	}
}
