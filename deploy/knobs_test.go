package deploy

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// The knobs operators expect from a chart reach both workloads' pods.
func TestPodKnobsTakeEffect(t *testing.T) {
	knobs := func(name string) map[string]any {
		return map[string]any{
			"podAnnotations": map[string]any{"example.com/a": name},
			"podLabels":      map[string]any{"team": name},
			"extraArgs":      []any{"--log-level=debug"},
			"extraEnv":       []any{map[string]any{"name": "GOGC", "value": "80"}},
			"affinity":       map[string]any{"nodeAffinity": map[string]any{"requiredDuringSchedulingIgnoredDuringExecution": map[string]any{"nodeSelectorTerms": []any{map[string]any{"matchExpressions": []any{map[string]any{"key": "zone", "operator": "In", "values": []any{name}}}}}}}},
			"updateStrategy": map[string]any{"type": map[string]string{"agent": "OnDelete", "controller": "Recreate"}[name]},
		}
	}
	_, objs := render(t, "capo", "capo-system", map[string]any{
		"imagePullSecrets": []any{map[string]any{"name": "regcred"}},
		"agent":            knobs("agent"),
		"controller":       knobs("controller"),
	})
	for kind, name := range map[string]string{"DaemonSet": "agent", "Deployment": "controller"} {
		o := find(t, objs, kind, "capo-"+name)
		pod := nested(t, o, "spec", "template")
		spec := pod["spec"].(map[string]any)
		meta := pod["metadata"].(map[string]any)
		c := spec["containers"].([]any)[0].(map[string]any)
		if meta["annotations"].(map[string]any)["example.com/a"] != name || meta["labels"].(map[string]any)["team"] != name {
			t.Errorf("%s: pod metadata %v", kind, meta)
		}
		if spec["imagePullSecrets"].([]any)[0].(map[string]any)["name"] != "regcred" {
			t.Errorf("%s: imagePullSecrets %v", kind, spec["imagePullSecrets"])
		}
		if !strings.Contains(strings.Join(toStrings(c["args"]), " "), "--log-level=debug") {
			t.Errorf("%s: args %v", kind, c["args"])
		}
		if env := c["env"].([]any); env[len(env)-1].(map[string]any)["name"] != "GOGC" {
			t.Errorf("%s: env %v", kind, env)
		}
		if _, ok := spec["affinity"].(map[string]any)["nodeAffinity"]; !ok {
			t.Errorf("%s: affinity %v", kind, spec["affinity"])
		}
		strategy := map[string]string{"agent": "updateStrategy", "controller": "strategy"}[name]
		if got := nested(t, o, "spec", strategy)["type"]; got != knobs(name)["updateStrategy"].(map[string]any)["type"] {
			t.Errorf("%s: %s %v", kind, strategy, got)
		}
	}
}

// Both pods run under the runtime's default seccomp profile, and the
// agent's pod carries no checksum of the hot-reloaded config: a config
// change rolls no agent.
func TestPodsSeccompAndNoConfigRollout(t *testing.T) {
	_, objs := render(t, "capo", "capo-system", nil)
	for _, kind := range []string{"DaemonSet", "Deployment"} {
		o := find(t, objs, kind, map[string]string{"DaemonSet": "capo-agent", "Deployment": "capo-controller"}[kind])
		if p, _, _ := unstructured.NestedString(o.Object, "spec", "template", "spec", "securityContext", "seccompProfile", "type"); p != "RuntimeDefault" {
			t.Errorf("%s: seccompProfile %q", kind, p)
		}
	}
	a, _ := Render("capo", "capo-system", nil)
	b, _ := Render("capo", "capo-system", map[string]any{"config": map[string]any{"ipReserveTime": "3h"}})
	podA := nested(t, find(t, mustObjects(t, a), "DaemonSet", "capo-agent"), "spec", "template")
	podB := nested(t, find(t, mustObjects(t, b), "DaemonSet", "capo-agent"), "spec", "template")
	if !equalJSON(podA, podB) {
		t.Error("a config change alters the agent's pod template: every agent would roll")
	}
}

// The controller's PodDisruptionBudget keeps one replica through a drain;
// with one replica it would block drains, so it is left out.
func TestControllerPDB(t *testing.T) {
	for replicas, want := range map[int]bool{2: true, 1: false} {
		out, _ := render(t, "capo", "capo-system", map[string]any{"controller": map[string]any{"replicas": replicas}})
		if got := strings.Contains(string(out), "kind: PodDisruptionBudget"); got != want {
			t.Errorf("%d replicas: PodDisruptionBudget rendered %v", replicas, got)
		}
	}
	out, _ := render(t, "capo", "capo-system", map[string]any{"controller": map[string]any{"podDisruptionBudget": map[string]any{"enabled": false}}})
	if strings.Contains(string(out), "kind: PodDisruptionBudget") {
		t.Error("PodDisruptionBudget rendered while disabled")
	}
}
