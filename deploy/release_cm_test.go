package deploy

import (
	"slices"
	"strings"
	"testing"
)

// The release ConfigMap renamed: the controller is told its name and its
// Role lets it patch that one (it clears the requests it answered); a
// name passed in extraArgs alone, which the Role would not follow, is
// refused.
func TestReleaseConfigMapNameReachesTheRole(t *testing.T) {
	_, objs := render(t, "capo", "capo-system", map[string]any{"controller": map[string]any{"releaseConfigMap": "ops-release"}})
	c := nested(t, find(t, objs, "Deployment", "capo-controller"), "spec", "template", "spec")["containers"].([]any)[0].(map[string]any)
	if !slices.Contains(toStrings(c["args"]), "--release-config-map=ops-release") {
		t.Errorf("controller args %v", c["args"])
	}
	role := find(t, objs, "Role", "capo-controller")
	var patchable []string
	for _, r := range role.Object["rules"].([]any) {
		rule := r.(map[string]any)
		if slices.Contains(toStrings(rule["verbs"]), "patch") && slices.Contains(toStrings(rule["resources"]), "configmaps") {
			patchable = append(patchable, toStrings(rule["resourceNames"])...)
		}
	}
	if !slices.Equal(patchable, []string{"ops-release"}) {
		t.Errorf("the Role lets the controller patch ConfigMaps %v, want [ops-release]", patchable)
	}
	_, err := Render("capo", "capo-system", map[string]any{"controller": map[string]any{"extraArgs": []any{"--release-config-map=other"}}})
	if err == nil || !strings.Contains(err.Error(), "controller.releaseConfigMap") {
		t.Errorf("--release-config-map in extraArgs: %v", err)
	}
}
