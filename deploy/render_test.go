package deploy

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/capo-net/capo/pkg/config"
)

var update = flag.Bool("update", false, "rewrite deploy/manifests/ from the chart")

// The plain manifests are the chart rendered with its defaults; they are
// regenerated (make manifests), never edited by hand. capo.yaml applies on
// every Kubernetes the chart supports (1.27+): the admission policy, which
// needs 1.30, is in a file of its own, as the chart renders it only where
// the API serves it.
func TestManifestsInSync(t *testing.T) {
	c, err := LoadChart()
	if err != nil {
		t.Fatal(err)
	}
	main, admission, err := RenderManifests(c)
	if err != nil {
		t.Fatal(err)
	}
	for file, got := range map[string][]byte{ManifestsFile(): main, AdmissionManifestsFile(): admission} {
		if *update {
			if err := os.WriteFile(file, got, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		want, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Fatalf("deploy/manifests/%s is out of date with the chart: run make manifests", filepath.Base(file))
		}
	}
	for _, o := range mustObjects(t, main) {
		if strings.HasPrefix(o.GetKind(), "ValidatingAdmissionPolicy") {
			t.Errorf("capo.yaml holds a %s, which Kubernetes before 1.30 does not serve", o.GetKind())
		}
	}
	kinds := map[string]bool{}
	for _, o := range mustObjects(t, admission) {
		kinds[o.GetKind()] = true
	}
	if !kinds["ValidatingAdmissionPolicy"] || !kinds["ValidatingAdmissionPolicyBinding"] || len(kinds) != 2 {
		t.Errorf("capo-admission-policy.yaml holds %v", kinds)
	}
	// Together they are the chart on a 1.30+ API, nothing lost or repeated.
	all, err := Render("capo", "capo-system", nil, ManifestAPIVersions...)
	if err != nil {
		t.Fatal(err)
	}
	if len(mustObjects(t, all)) != len(mustObjects(t, main))+len(mustObjects(t, admission)) {
		t.Error("the two files do not add up to the chart rendered for 1.30+")
	}
}

func find(t *testing.T, objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	t.Fatalf("no %s %s rendered", kind, name)
	return nil
}

// render renders the chart and splits it into objects, failing t on error.
func render(t *testing.T, release, namespace string, values map[string]any, apis ...string) ([]byte, []*unstructured.Unstructured) {
	t.Helper()
	out, err := Render(release, namespace, values, apis...)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := Objects(out)
	if err != nil {
		t.Fatal(err)
	}
	return out, objs
}

func TestDefaults(t *testing.T) {
	_, objs := render(t, "capo", "capo-system", nil)
	kinds := map[string]int{}
	for _, o := range objs {
		kinds[o.GetKind()]++
		if o.GetKind() != "ClusterRole" && o.GetKind() != "ClusterRoleBinding" && o.GetNamespace() != "capo-system" {
			t.Errorf("%s %s in namespace %q", o.GetKind(), o.GetName(), o.GetNamespace())
		}
	}
	// No ServiceMonitor or PrometheusRule: a cluster without the Prometheus
	// operator's CRDs must take the defaults (see TestMonitoringWhereTheAPIHasIt).
	for kind, n := range map[string]int{"DaemonSet": 1, "Deployment": 1, "ConfigMap": 2, "ServiceAccount": 2, "ClusterRole": 2, "Role": 2, "Service": 2, "ServiceMonitor": 0, "PrometheusRule": 0} {
		if kinds[kind] != n {
			t.Errorf("%d %s, want %d", kinds[kind], kind, n)
		}
	}
	// The ConfigMap holds a config capo itself accepts, equal to its defaults.
	cm := find(t, objs, "ConfigMap", "capo-config")
	data, _, _ := unstructured.NestedString(cm.Object, "data", "config.yaml")
	c, err := config.Parse([]byte(data))
	if err != nil {
		t.Fatalf("the chart's config does not parse: %v\n%s", err, data)
	}
	if d := config.Default(); c.IPReserveTime != d.IPReserveTime || c.IPReserveMaxCount != d.IPReserveMaxCount || len(c.Selectors) != len(d.Selectors) {
		t.Fatalf("chart defaults %+v differ from capo's %+v", c, d)
	}
	dash := find(t, objs, "ConfigMap", "capo-grafana-dashboard")
	board, _, _ := unstructured.NestedString(dash.Object, "data", "capo.json")
	var v map[string]any
	if err := json.Unmarshal([]byte(board), &v); err != nil || len(v["panels"].([]any)) < 8 {
		t.Fatalf("dashboard JSON: %v", err)
	}
	args, _, _ := unstructured.NestedSlice(find(t, objs, "DaemonSet", "capo-agent").Object, "spec", "template", "spec", "containers")
	if s := strings.Join(toStrings(args[0].(map[string]any)["args"]), " "); !strings.Contains(s, "--manage-cni") {
		t.Fatalf("agent args %s", s)
	}
}

// With the Prometheus operator's API, the monitoring objects are rendered
// unless turned off.
func TestMonitoringWhereTheAPIHasIt(t *testing.T) {
	for _, tc := range []struct {
		values map[string]any
		want   int
	}{
		{nil, 1},
		{map[string]any{"metrics": map[string]any{"serviceMonitor": map[string]any{"enabled": false}, "prometheusRule": map[string]any{"enabled": false}}}, 0},
	} {
		out, err := Render("capo", "capo-system", tc.values, MonitoringAPI...)
		if err != nil {
			t.Fatal(err)
		}
		for _, kind := range []string{"kind: ServiceMonitor", "kind: PrometheusRule"} {
			if n := strings.Count(string(out), kind); n != tc.want {
				t.Errorf("values %v: %d %q, want %d", tc.values, n, kind, tc.want)
			}
		}
	}
}

// kubectl apply -f creates in file order: what a workload's pods need
// (ServiceAccount, RBAC, ConfigMap) comes before the workload.
func TestInstallOrder(t *testing.T) {
	_, objs := render(t, "capo", "capo-system", nil, MonitoringAPI...)
	first := map[string]int{}
	for i, o := range objs {
		if _, ok := first[o.GetKind()]; !ok {
			first[o.GetKind()] = i
		}
	}
	for _, need := range []string{"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "ConfigMap"} {
		for _, workload := range []string{"DaemonSet", "Deployment"} {
			if first[need] > first[workload] {
				t.Errorf("%s comes after %s", need, workload)
			}
		}
	}
}

func TestValuesTakeEffect(t *testing.T) {
	out, objs := render(t, "edge", "kube-system", map[string]any{
		"datastore":  map[string]any{"type": "etcdv3", "etcdEndpoints": "https://10.0.0.10:2379", "etcdTLSSecret": "calico-etcd-secrets"},
		"controller": map[string]any{"replicas": 3},
		"agent":      map[string]any{"manageCNI": false},
		"config":     map[string]any{"ipReserveTime": "2h", "podSelectors": []any{map[string]any{"matchLabels": map[string]any{"app": "zookeeper"}}}},
		"metrics":    map[string]any{"serviceMonitor": map[string]any{"enabled": false}, "prometheusRule": map[string]any{"enabled": false}},
	})
	text := string(out)
	for _, want := range []string{"ETCD_ENDPOINTS", "https://10.0.0.10:2379", "secretName: calico-etcd-secrets", "replicas: 3", "ipReserveTime: 2h", "app: zookeeper"} {
		if !strings.Contains(text, want) {
			t.Errorf("rendered manifests lack %q", want)
		}
	}
	for _, gone := range []string{"kind: ServiceMonitor", "kind: PrometheusRule", "--manage-cni"} {
		if strings.Contains(text, gone) {
			t.Errorf("rendered manifests still have %q", gone)
		}
	}
	cm := find(t, objs, "ConfigMap", "capo-config")
	data, _, _ := unstructured.NestedString(cm.Object, "data", "config.yaml")
	if _, err := config.Parse([]byte(data)); err != nil {
		t.Fatalf("non-default config does not parse: %v\n%s", err, data)
	}
	if _, err := Render("x", "y", map[string]any{"datastore": map[string]any{"type": "etcdv3"}}); err == nil || !strings.Contains(err.Error(), "etcdEndpoints is required") {
		t.Fatalf("etcdv3 without endpoints: %v", err)
	}
}

func toStrings(v any) []string {
	var out []string
	for _, s := range v.([]any) {
		out = append(out, s.(string))
	}
	return out
}

func nested(t *testing.T, o *unstructured.Unstructured, path ...string) map[string]any {
	t.Helper()
	m, ok, err := unstructured.NestedMap(o.Object, path...)
	if !ok || err != nil {
		t.Fatalf("%s %s has no %v: %v", o.GetKind(), o.GetName(), path, err)
	}
	return m
}

func mustObjects(t *testing.T, manifests []byte) []*unstructured.Unstructured {
	t.Helper()
	objs, err := Objects(manifests)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

func equalJSON(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}
