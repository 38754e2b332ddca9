// Package deploy renders capo's Helm chart with Helm's own library, for the
// plain manifests and for the tests that apply them to a real API server.
package deploy

import (
	"bytes"
	"fmt"
	"path/filepath"
	"runtime"
	"slices"
	"strings"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// ChartDir is the chart's directory in this checkout.
func ChartDir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "chart", "capo")
}

// ManifestsFile is the rendered default, for `kubectl apply -f`.
func ManifestsFile() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "manifests", "capo.yaml")
}

// Render renders the chart as `helm template` would, documents ordered by
// template name, with values over the chart's defaults.
func Render(release, namespace string, values map[string]any) ([]byte, error) {
	c, err := loader.Load(ChartDir())
	if err != nil {
		return nil, fmt.Errorf("loading the chart: %w", err)
	}
	vals, err := chartutil.ToRenderValues(c, values, chartutil.ReleaseOptions{Name: release, Namespace: namespace, IsInstall: true, Revision: 1}, chartutil.DefaultCapabilities)
	if err != nil {
		return nil, err
	}
	files, err := engine.Render(c, vals)
	if err != nil {
		return nil, fmt.Errorf("rendering the chart: %w", err)
	}
	names := make([]string, 0, len(files))
	for n := range files {
		if strings.HasSuffix(n, ".yaml") && strings.TrimSpace(files[n]) != "" {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	var out bytes.Buffer
	for _, n := range names {
		for _, doc := range strings.Split(files[n], "\n---") {
			if strings.TrimSpace(doc) == "" {
				continue
			}
			fmt.Fprintf(&out, "---\n# Source: %s\n%s\n", strings.TrimPrefix(n, c.Name()+"/"), strings.Trim(doc, "\n"))
		}
	}
	return out.Bytes(), nil
}

// Objects splits rendered manifests into objects.
func Objects(manifests []byte) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	for _, doc := range bytes.Split(manifests, []byte("\n---\n")) {
		doc = bytes.TrimPrefix(doc, []byte("---\n"))
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(doc, &u.Object); err != nil {
			return nil, fmt.Errorf("%w in:\n%s", err, doc)
		}
		if len(u.Object) == 0 {
			continue
		}
		out = append(out, u)
	}
	return out, nil
}
