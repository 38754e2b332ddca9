package deploy

import (
	"testing"
)

// The agent mounts exactly the host paths it needs: of Calico's run
// directory only the IPAM lock file (BIRD's control socket lives beside
// it), each at the same path inside the pod.
func TestAgentHostPaths(t *testing.T) {
	_, objs := render(t, "capo", "capo-system", nil)
	spec := nested(t, find(t, objs, "DaemonSet", "capo-agent"), "spec", "template", "spec")
	host := map[string]string{} // volume: host path
	types := map[string]string{}
	for _, v := range spec["volumes"].([]any) {
		v := v.(map[string]any)
		hp, ok := v["hostPath"].(map[string]any)
		if !ok {
			continue
		}
		host[v["name"].(string)], types[v["name"].(string)] = hp["path"].(string), hp["type"].(string)
	}
	mounted := map[string]bool{}
	for _, m := range spec["containers"].([]any)[0].(map[string]any)["volumeMounts"].([]any) {
		m := m.(map[string]any)
		path, ok := host[m["name"].(string)]
		if !ok {
			continue
		}
		if m["mountPath"] != path {
			t.Errorf("%s at %v in the pod, %s on the host", m["name"], m["mountPath"], path)
		}
		mounted[path] = true
	}
	want := []string{"/opt/cni/bin", "/etc/cni/net.d", "/var/run/capo", "/var/lib/capo", "/var/run/calico/ipam.lock", "/var/log/calico/cni"}
	if len(mounted) != len(want) {
		t.Errorf("host paths mounted %v, want %v", mounted, want)
	}
	for _, p := range want {
		if !mounted[p] {
			t.Errorf("%s not mounted (mounted: %v)", p, mounted)
		}
	}
	if types["calico-ipam-lock"] != "FileOrCreate" {
		t.Errorf("the IPAM lock mount is %q, want FileOrCreate", types["calico-ipam-lock"])
	}
}
