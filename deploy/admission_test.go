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

// The admission policy is rendered where the API serves it, bound to the
// release's two ServiceAccounts, and can be turned off.
func TestAdmissionPolicyWhereTheAPIHasIt(t *testing.T) {
	_, without := render(t, "capo", "capo-system", nil)
	for _, o := range without {
		if strings.HasPrefix(o.GetKind(), "ValidatingAdmissionPolicy") {
			t.Fatalf("%s rendered where the API does not serve it", o.GetKind())
		}
	}
	out, objs := render(t, "capo", "capo-system", nil, ManifestAPIVersions...)
	p := find(t, objs, "ValidatingAdmissionPolicy", "capo-ipreservations-capo-system")
	b := find(t, objs, "ValidatingAdmissionPolicyBinding", "capo-ipreservations-capo-system")
	if name, _, _ := unstructured.NestedString(b.Object, "spec", "policyName"); name != p.GetName() {
		t.Errorf("the binding names %q", name)
	}
	for _, sa := range []string{"system:serviceaccount:capo-system:capo-agent", "system:serviceaccount:capo-system:capo-controller"} {
		if !strings.Contains(string(out), "'"+sa+"'") {
			t.Errorf("the policy does not match %s", sa)
		}
	}
	_, off := render(t, "capo", "capo-system", map[string]any{"admissionPolicy": map[string]any{"enabled": false}}, ManifestAPIVersions...)
	for _, o := range off {
		if strings.HasPrefix(o.GetKind(), "ValidatingAdmissionPolicy") {
			t.Fatal("rendered with admissionPolicy.enabled=false")
		}
	}
}

// lookups serves the chart's lookups from a fake cluster.
type lookups struct{ dyn dynamic.Interface }

func (l lookups) GetClientFor(apiVersion, kind string) (dynamic.NamespaceableResourceInterface, bool, error) {
	return l.dyn.Resource(schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}), false, nil
}

func namespaceLabelled(name string, labels map[string]any) lookups {
	ns := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Namespace",
		"metadata": map[string]any{"name": name, "labels": labels},
	}}
	return lookups{dynamicfake.NewSimpleDynamicClient(runtime.NewScheme(), ns)}
}

// A namespace enforcing a level that does not admit the agent stops the
// install with what to do; privileged, no label, or the check off pass.
func TestPodSecurityCheck(t *testing.T) {
	_, err := RenderLooking(namespaceLabelled("capo-system", map[string]any{"pod-security.kubernetes.io/enforce": "baseline"}), "capo", "capo-system", nil)
	if err == nil || !strings.Contains(err.Error(), `enforces Pod Security level "baseline"`) || !strings.Contains(err.Error(), "kubectl label namespace capo-system pod-security.kubernetes.io/enforce=privileged") {
		t.Fatalf("baseline namespace: %v", err)
	}
	for name, c := range map[string]struct {
		labels map[string]any
		values map[string]any
	}{
		"privileged":    {map[string]any{"pod-security.kubernetes.io/enforce": "privileged"}, nil},
		"no label":      {map[string]any{"team": "net"}, nil},
		"check off":     {map[string]any{"pod-security.kubernetes.io/enforce": "restricted"}, map[string]any{"podSecurityCheck": false}},
		"only warn set": {map[string]any{"pod-security.kubernetes.io/warn": "restricted"}, nil},
	} {
		if _, err := RenderLooking(namespaceLabelled("capo-system", c.labels), "capo", "capo-system", c.values); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}
