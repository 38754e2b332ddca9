package deploy

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	dynamicfake "k8s.io/client-go/dynamic/fake"
)

// Each listed owner kind is a cluster-wide list and watch grant: the
// schema takes only a named custom resource's group and kind, and says
// which field is wrong.
func TestSchemaRejectsOwnerKindsThatWidenRBAC(t *testing.T) {
	entry := func(group, kind, resource string) map[string]any {
		return map[string]any{"config": map[string]any{"ownerKinds": []any{map[string]any{"group": group, "version": "v1", "kind": kind, "resource": resource}}}}
	}
	for name, c := range map[string]struct {
		values map[string]any
		want   string
	}{
		"core Secret":       {entry("", "Secret", "secrets"), "group"},
		"no group":          {map[string]any{"config": map[string]any{"ownerKinds": []any{map[string]any{"version": "v1", "kind": "Secret", "resource": "secrets"}}}}, "group"},
		"wildcard group":    {entry("*", "Broker", "brokers"), "group"},
		"wildcard kind":     {entry("example.com", "*", "brokers"), "kind"},
		"wildcard resource": {entry("example.com", "Broker", "*"), "resource"},
		"Kubernetes group":  {entry("batch", "Job", "jobs"), "group"},
		"k8s.io group":      {entry("rbac.authorization.k8s.io", "ClusterRole", "clusterroles"), "group"},
		"subresource":       {entry("example.com", "Broker", "brokers/status"), "resource"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Render("capo", "capo-system", c.values)
			if err == nil || !strings.Contains(err.Error(), "schema") || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("values %v: %v", c.values, err)
			}
		})
	}
	if _, err := Render("capo", "capo-system", entry("apps.kruise.io", "StatefulSet", "statefulsets")); err == nil || !strings.Contains(err.Error(), "capo watches OpenKruise's Advanced StatefulSet without being told; remove the entry") {
		t.Fatalf("Kruise's StatefulSet listed: %v", err)
	}
	if _, err := Render("capo", "capo-system", entry("leaderworkerset.x-k8s.io", "LeaderWorkerSet", "leaderworkersets")); err != nil {
		t.Fatalf("a custom resource's kind: %v", err)
	}
}

// Installing against a cluster whose CRD of a listed kind is
// cluster-scoped stops with what to do; a namespaced one, or a CRD not
// there yet, installs.
func TestClusterScopedOwnerKindStopsTheInstall(t *testing.T) {
	values := map[string]any{"config": map[string]any{"ownerKinds": []any{map[string]any{"group": "example.com", "version": "v1", "kind": "Grid", "resource": "grids"}}}}
	_, err := RenderLooking(crds(map[string]string{"grids.example.com": "Cluster"}), "capo", "capo-system", values)
	if err == nil || !strings.Contains(err.Error(), "the CRD grids.example.com is cluster-scoped") || !strings.Contains(err.Error(), "remove the entry") {
		t.Fatalf("cluster-scoped: %v", err)
	}
	for name, scopes := range map[string]map[string]string{"namespaced": {"grids.example.com": "Namespaced"}, "not there": {}} {
		if _, err := RenderLooking(crds(scopes), "capo", "capo-system", values); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// crdLookups serves the chart's lookups of CRDs and Namespaces from a fake
// cluster.
type crdLookups struct{ dyn dynamic.Interface }

func crds(scopes map[string]string) crdLookups {
	var objs []runtime.Object
	for name, scope := range scopes {
		objs = append(objs, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
			"metadata": map[string]any{"name": name}, "spec": map[string]any{"scope": scope},
		}})
	}
	return crdLookups{dynamicfake.NewSimpleDynamicClient(runtime.NewScheme(), objs...)}
}

func (l crdLookups) GetClientFor(apiVersion, kind string) (dynamic.NamespaceableResourceInterface, bool, error) {
	if kind == "CustomResourceDefinition" {
		return l.dyn.Resource(schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}), false, nil
	}
	return l.dyn.Resource(schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}), false, nil
}
