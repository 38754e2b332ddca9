package deploy

import (
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// image.digest pins the image and global.imageRegistry takes the place of
// the repository's registry, on both workloads; neither is accepted and
// then ignored.
func TestImageRegistryAndDigest(t *testing.T) {
	const digest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	for _, tc := range []struct {
		values map[string]any
		want   string
	}{
		{nil, "ghcr.io/capo-net/capo:"},
		{map[string]any{"image": map[string]any{"tag": "v1.2.3", "digest": digest}}, "ghcr.io/capo-net/capo:v1.2.3@" + digest},
		{map[string]any{"global": map[string]any{"imageRegistry": "mirror.example.com:5000/"}, "image": map[string]any{"tag": "v1"}}, "mirror.example.com:5000/capo-net/capo:v1"},
		{map[string]any{"global": map[string]any{"imageRegistry": "mirror.example.com"}, "image": map[string]any{"repository": "capo/capo", "tag": "v1"}}, "mirror.example.com/capo/capo:v1"},
	} {
		_, objs := render(t, "capo", "capo-system", tc.values)
		for kind, name := range map[string]string{"DaemonSet": "capo-agent", "Deployment": "capo-controller"} {
			c := podSpec(t, objs, kind, name)["containers"].([]any)[0].(map[string]any)
			if img := c["image"].(string); !strings.HasPrefix(img, tc.want) || (tc.values == nil && strings.Contains(img, "@")) {
				t.Errorf("%v: %s image %s, want %s", tc.values, kind, img, tc.want)
			}
		}
	}
	if _, err := Render("capo", "capo-system", map[string]any{"image": map[string]any{"digest": "deadbeef"}}); err == nil || !strings.Contains(err.Error(), "digest") {
		t.Errorf("a digest that is not sha256:<hex> rendered: %v", err)
	}
}

// The security contexts merge key by key: an SELinux type or an AppArmor
// profile is added without restating (or losing) the hardening.
func TestSecurityContextOverrides(t *testing.T) {
	_, objs := render(t, "capo", "capo-system", map[string]any{
		"agent": map[string]any{
			"securityContext":    map[string]any{"seLinuxOptions": map[string]any{"type": "spc_t"}, "appArmorProfile": map[string]any{"type": "RuntimeDefault"}},
			"podSecurityContext": map[string]any{"seLinuxOptions": map[string]any{"level": "s0"}},
		},
		"controller": map[string]any{"securityContext": map[string]any{"readOnlyRootFilesystem": nil}},
	})
	agent := podSpec(t, objs, "DaemonSet", "capo-agent")
	sc := agent["containers"].([]any)[0].(map[string]any)["securityContext"].(map[string]any)
	if sc["seLinuxOptions"].(map[string]any)["type"] != "spc_t" || sc["appArmorProfile"] == nil || sc["readOnlyRootFilesystem"] != true || toString(sc["runAsUser"]) != "0" {
		t.Errorf("agent container securityContext %v", sc)
	}
	psc := agent["securityContext"].(map[string]any)
	if psc["seLinuxOptions"] == nil || psc["seccompProfile"] == nil {
		t.Errorf("agent pod securityContext %v", psc)
	}
	ctrl := podSpec(t, objs, "Deployment", "capo-controller")
	csc := ctrl["containers"].([]any)[0].(map[string]any)["securityContext"].(map[string]any)
	if _, ok := csc["readOnlyRootFilesystem"]; ok || csc["allowPrivilegeEscalation"] != false {
		t.Errorf("controller securityContext after null: %v", csc)
	}
	if ctrl["securityContext"].(map[string]any)["runAsNonRoot"] != true {
		t.Errorf("controller pod securityContext %v", ctrl["securityContext"])
	}
}

// By default the controller reaches control-plane nodes and pools tainted
// CriticalAddonsOnly, as Calico's kube-controllers does, but not every
// taint: it must not stay on a NotReady node it is meant to cover.
func TestControllerTolerations(t *testing.T) {
	_, objs := render(t, "capo", "capo-system", nil)
	tols := podSpec(t, objs, "Deployment", "capo-controller")["tolerations"].([]any)
	keys := map[string]bool{}
	for _, x := range tols {
		tol := x.(map[string]any)
		if tol["key"] == nil || tol["key"] == "" {
			t.Errorf("a toleration of every taint: %v", tol)
		}
		keys[toString(tol["key"])] = true
	}
	for _, k := range []string{"CriticalAddonsOnly", "node-role.kubernetes.io/control-plane"} {
		if !keys[k] {
			t.Errorf("controller does not tolerate %s: %v", k, tols)
		}
	}
}

// Every probe's timings are values; the handlers stay the chart's, and a
// key that is not a timing is refused.
func TestProbeTuning(t *testing.T) {
	_, objs := render(t, "capo", "capo-system", map[string]any{
		"agent":      map[string]any{"livenessProbe": map[string]any{"failureThreshold": 9}, "startupProbe": map[string]any{"failureThreshold": 150}},
		"controller": map[string]any{"readinessProbe": map[string]any{"periodSeconds": 7}},
	})
	agent := podSpec(t, objs, "DaemonSet", "capo-agent")["containers"].([]any)[0].(map[string]any)
	ctrl := podSpec(t, objs, "Deployment", "capo-controller")["containers"].([]any)[0].(map[string]any)
	for _, tc := range []struct {
		c           map[string]any
		probe, path string
		key, want   string
	}{
		{agent, "livenessProbe", "/livez", "failureThreshold", "9"},
		{agent, "livenessProbe", "/livez", "periodSeconds", "10"},
		{agent, "startupProbe", "/livez", "failureThreshold", "150"},
		{ctrl, "readinessProbe", "/readyz", "periodSeconds", "7"},
		{ctrl, "startupProbe", "/healthz", "failureThreshold", "90"},
	} {
		p := tc.c[tc.probe].(map[string]any)
		if toString(p[tc.key]) != tc.want || p["httpGet"].(map[string]any)["path"] != tc.path {
			t.Errorf("%s %s: %v", tc.c["name"], tc.probe, p)
		}
	}
	_, err := Render("capo", "capo-system", map[string]any{"agent": map[string]any{"livenessProbe": map[string]any{"exec": map[string]any{"command": []any{"true"}}}}})
	if err == nil || !strings.Contains(err.Error(), "livenessProbe") {
		t.Errorf("a probe handler in values rendered: %v", err)
	}
}

// The agents' targets get a node label from their pod's node, and only
// theirs; the operator's relabelings are appended.
func TestServiceMonitorNodeLabel(t *testing.T) {
	extra := map[string]any{"targetLabel": "cluster", "replacement": "east"}
	_, objs := render(t, "capo", "capo-system", map[string]any{"metrics": map[string]any{"serviceMonitor": map[string]any{
		"relabelings": []any{extra}, "metricRelabelings": []any{map[string]any{"action": "drop", "regex": "go_.*", "sourceLabels": []any{"__name__"}}},
	}}}, MonitoringAPI...)
	ep := nested(t, find(t, objs, "ServiceMonitor", "capo"), "spec")["endpoints"].([]any)[0].(map[string]any)
	rl := ep["relabelings"].([]any)
	first := rl[0].(map[string]any)
	if first["targetLabel"] != "node" || first["regex"] != "capo-agent-metrics;(.+)" || !equalJSON(first["sourceLabels"], []string{"__meta_kubernetes_service_name", "__meta_kubernetes_pod_node_name"}) {
		t.Errorf("node relabeling %v", first)
	}
	if len(rl) != 2 || !equalJSON(rl[1], extra) {
		t.Errorf("relabelings %v", rl)
	}
	if len(ep["metricRelabelings"].([]any)) != 1 {
		t.Errorf("metricRelabelings %v", ep["metricRelabelings"])
	}
}

// The dashboard's ConfigMap goes where Grafana's sidecar looks, into the
// folder asked for.
func TestDashboardNamespaceAndFolder(t *testing.T) {
	_, objs := render(t, "capo", "capo-system", map[string]any{"metrics": map[string]any{"grafanaDashboard": map[string]any{"namespace": "monitoring", "folder": "CNI"}}})
	cm := find(t, objs, "ConfigMap", "capo-grafana-dashboard")
	if cm.GetNamespace() != "monitoring" || cm.GetAnnotations()["grafana_folder"] != "CNI" {
		t.Errorf("dashboard in %q, annotations %v", cm.GetNamespace(), cm.GetAnnotations())
	}
	_, objs = render(t, "capo", "capo-system", nil)
	if cm := find(t, objs, "ConfigMap", "capo-grafana-dashboard"); cm.GetNamespace() != "capo-system" || len(cm.GetAnnotations()) != 0 {
		t.Errorf("default dashboard in %q, annotations %v", cm.GetNamespace(), cm.GetAnnotations())
	}
}

func podSpec(t *testing.T, objs []*unstructured.Unstructured, kind, name string) map[string]any {
	t.Helper()
	return nested(t, find(t, objs, kind, name), "spec", "template", "spec")
}

// The chart in the tree names a -dev image no registry has: NOTES.txt says
// so unless an image is set, rather than an install that looks fine while
// no pod can pull.
func TestNotesWarnOfTheDevImage(t *testing.T) {
	c, err := LoadChart()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(c.Metadata.AppVersion, "-dev") || !strings.HasPrefix(c.Metadata.AppVersion, "v") {
		t.Fatalf("in-tree appVersion %q: want the next release's vX.Y.Z-dev (make release stamps the real one)", c.Metadata.AppVersion)
	}
	for _, tc := range []struct {
		values map[string]any
		warn   bool
	}{
		{nil, true},
		{map[string]any{"image": map[string]any{"repository": "registry.example.com/capo", "tag": "v0.2.0"}}, false},
	} {
		vals, err := chartutil.ToRenderValues(c, tc.values, chartutil.ReleaseOptions{Name: "capo", Namespace: "capo-system", IsInstall: true}, chartutil.DefaultCapabilities)
		if err != nil {
			t.Fatal(err)
		}
		files, err := engine.Render(c, vals)
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Contains(files["capo/templates/NOTES.txt"], "is published nowhere"); got != tc.warn {
			t.Errorf("%v: warning %v, want %v:\n%s", tc.values, got, tc.warn, files["capo/templates/NOTES.txt"])
		}
	}
}
