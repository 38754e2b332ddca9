// Package deploy renders capo's Helm chart with Helm's own library, for the
// plain manifests and for the tests that apply them to a real API server.
package deploy

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/releaseutil"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// ChartDir is the chart's directory in this checkout.
func ChartDir() string { return filepath.Join(sourceDir(), "chart", "capo") }

// ManifestsFile is the rendered default, for `kubectl apply -f` on every
// Kubernetes version the chart supports (1.27+): without the admission
// policy, which needs 1.30.
func ManifestsFile() string { return filepath.Join(sourceDir(), "manifests", "capo.yaml") }

// sourceDir is this package's directory in the checkout. A -trimpath build
// (make's default: it shares the compile cache with the binaries) records
// no absolute source path, so the checkout is found from the working
// directory, as the go command finds go.mod.
func sourceDir() string {
	if _, file, _, ok := runtime.Caller(0); ok && filepath.IsAbs(file) {
		return filepath.Dir(file)
	}
	wd, err := os.Getwd()
	if err != nil {
		return "deploy"
	}
	for d := wd; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "deploy", "chart", "capo", "Chart.yaml")); err == nil {
			return filepath.Join(d, "deploy")
		}
		if filepath.Dir(d) == d {
			return filepath.Join(wd, "deploy")
		}
	}
}

// AdmissionManifestsFile is the admission policy alone, applied after
// ManifestsFile where the API serves ValidatingAdmissionPolicy v1 (1.30+),
// as the chart renders it only there.
func AdmissionManifestsFile() string {
	return filepath.Join(filepath.Dir(ManifestsFile()), "capo-admission-policy.yaml")
}

// admissionSource is the template the admission policy is rendered from.
const admissionSource = "templates/admission.yaml"

// RenderManifests renders c's defaults for kubectl apply as two files:
// everything but the admission policy, which every supported Kubernetes
// takes, and the policy alone, for 1.30 and later.
func RenderManifests(c *chart.Chart) (manifests, admission []byte, err error) {
	out, err := RenderChart(c, "capo", "capo-system", nil, ManifestAPIVersions...)
	if err != nil {
		return nil, nil, err
	}
	// renderChart writes each object as "---\n# Source: <template>\n...".
	const head = "---\n# Source: "
	var rest, policy bytes.Buffer
	for _, doc := range bytes.Split(out, []byte(head))[1:] {
		w := &rest
		if bytes.HasPrefix(doc, []byte(admissionSource+"\n")) {
			w = &policy
		}
		w.WriteString(head)
		w.Write(doc)
	}
	return rest.Bytes(), policy.Bytes(), nil
}

// MonitoringAPI is what the chart's ServiceMonitor and PrometheusRule need
// from the API server; without it (no Prometheus operator) they are not
// rendered, so a plain cluster takes the defaults as they are.
var MonitoringAPI = []string{"monitoring.coreos.com/v1", "monitoring.coreos.com/v1/ServiceMonitor", "monitoring.coreos.com/v1/PrometheusRule"}

// Render renders the chart as `helm template` (or `helm install`) would:
// values over the chart's defaults, objects in Helm's install order
// (ServiceAccounts and RBAC before the workloads that use them). apiVersions
// are what the target API server serves beyond the built-in ones, as
// `helm template --api-versions` gives them.
func Render(release, namespace string, values map[string]any, apiVersions ...string) ([]byte, error) {
	c, err := LoadChart()
	if err != nil {
		return nil, err
	}
	return RenderChart(c, release, namespace, values, apiVersions...)
}

// ManifestAPIVersions is ValidatingAdmissionPolicy v1 (Kubernetes 1.30 and
// later), which the chart's admission policy needs: the chart renders the
// policy only where the API serves it, and the plain manifests carry it in
// a file of its own (AdmissionManifestsFile).
var ManifestAPIVersions = []string{"admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy"}

// LoadChart loads the chart from this checkout.
func LoadChart() (*chart.Chart, error) {
	c, err := loader.Load(ChartDir())
	if err != nil {
		return nil, fmt.Errorf("loading the chart: %w", err)
	}
	return c, nil
}

// RenderChart is Render of a chart already loaded, e.g. one a release
// stamped with its version.
func RenderChart(c *chart.Chart, release, namespace string, values map[string]any, apiVersions ...string) ([]byte, error) {
	return renderChart(c, engine.Render, release, namespace, values, apiVersions...)
}

// RenderLooking is Render as helm install does it against a cluster: the
// chart's lookups (the namespace's Pod Security check) read through p.
func RenderLooking(p engine.ClientProvider, release, namespace string, values map[string]any, apiVersions ...string) ([]byte, error) {
	c, err := LoadChart()
	if err != nil {
		return nil, err
	}
	render := func(c *chart.Chart, v chartutil.Values) (map[string]string, error) {
		return engine.RenderWithClientProvider(c, v, p)
	}
	return renderChart(c, render, release, namespace, values, apiVersions...)
}

func renderChart(c *chart.Chart, render func(*chart.Chart, chartutil.Values) (map[string]string, error), release, namespace string, values map[string]any, apiVersions ...string) ([]byte, error) {
	caps := chartutil.DefaultCapabilities.Copy()
	caps.APIVersions = append(caps.APIVersions, apiVersions...)
	vals, err := chartutil.ToRenderValues(c, values, chartutil.ReleaseOptions{Name: release, Namespace: namespace, IsInstall: true, Revision: 1}, caps)
	if err != nil {
		return nil, err
	}
	files, err := render(c, vals)
	if err != nil {
		return nil, fmt.Errorf("rendering the chart: %w", err)
	}
	for n := range files {
		if !strings.HasSuffix(n, ".yaml") {
			delete(files, n) // helpers, NOTES.txt
		}
	}
	_, manifests, err := releaseutil.SortManifests(files, caps.APIVersions, releaseutil.InstallOrder)
	if err != nil {
		return nil, fmt.Errorf("sorting the rendered chart: %w", err)
	}
	var out bytes.Buffer
	for _, m := range manifests {
		fmt.Fprintf(&out, "---\n# Source: %s\n%s\n", strings.TrimPrefix(m.Name, c.Name()+"/"), strings.Trim(m.Content, "\n"))
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
