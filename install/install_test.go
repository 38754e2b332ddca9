package install

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden .capo files")

// The golden files are real conflists' shapes; beside each, the patched
// form a reviewer has read. Uninstall must give back the original bytes.
func TestPatchGolden(t *testing.T) {
	inputs, _ := filepath.Glob("testdata/*.conf*")
	var n int
	for _, in := range inputs {
		if strings.HasSuffix(in, ".capo") || strings.HasSuffix(in, ".refused") {
			continue
		}
		n++
		t.Run(filepath.Base(in), func(t *testing.T) {
			orig, err := os.ReadFile(in)
			if err != nil {
				t.Fatal(err)
			}
			got, err := Patch(orig, map[string]any{"agent_socket": "/var/run/capo/agent.sock"})
			if err != nil {
				t.Fatal(err)
			}
			golden := in + ".capo"
			if *update {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update once and review the file)", err)
			}
			if string(got) != string(want) {
				t.Fatalf("patched differs from %s:\n%s", golden, got)
			}
			assertOnlyIPAMChanged(t, orig, got)
			again, err := Patch(got, map[string]any{"agent_socket": "/var/run/capo/agent.sock"})
			if err != nil || string(again) != string(got) {
				t.Fatalf("installing twice is not installing once: %v", err)
			}
			back, err := Unpatch(got)
			if err != nil || string(back) != string(orig) {
				t.Fatalf("uninstall did not give back the original bytes (%v):\n%s", err, back)
			}
			if same, _ := Unpatch(orig); string(same) != string(orig) {
				t.Fatal("uninstalling an unpatched config changed it")
			}
		})
	}
	if n < 5 {
		t.Fatalf("only %d golden inputs", n)
	}
}

// assertOnlyIPAMChanged: every key of every plugin other than the calico
// plugin's ipam is equal before and after, and the delegate is the original.
func assertOnlyIPAMChanged(t *testing.T, orig, patched []byte) {
	t.Helper()
	var a, b map[string]any
	_ = json.Unmarshal(orig, &a)
	if err := json.Unmarshal(patched, &b); err != nil {
		t.Fatalf("patched config is not JSON: %v", err)
	}
	calicoOf := func(m map[string]any) map[string]any {
		if ps, ok := m["plugins"].([]any); ok {
			for _, p := range ps {
				if pm := p.(map[string]any); pm["type"] == "calico" {
					return pm
				}
			}
		}
		return m
	}
	ca, cb := calicoOf(a), calicoOf(b)
	ipam := cb["ipam"].(map[string]any)
	if ipam["type"] != "capo-ipam" || !reflect.DeepEqual(ipam["delegate"], ca["ipam"]) {
		t.Fatalf("ipam %v does not wrap the original %v", ipam, ca["ipam"])
	}
	delete(ca, "ipam")
	delete(cb, "ipam")
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("something besides the calico plugin's ipam changed")
	}
}

func TestRefusals(t *testing.T) {
	for file, want := range map[string]string{
		"testdata/canal.conflist.refused":     `ipam is "host-local", not calico-ipam`,
		"testdata/flannel.conflist.refused":   "no plugin of type calico",
		"testdata/truncated.conflist.refused": "cannot parse",
	} {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		out, err := Patch(data, nil)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err %v, want %q", file, err, want)
		}
		if string(out) != string(data) && out != nil {
			t.Errorf("%s: a refused config was changed", file)
		}
	}
}

func TestUnpatchWithoutDelegate(t *testing.T) {
	got, err := Unpatch([]byte(`{"name":"n","type":"calico","ipam":{"type":"capo-ipam"}}`))
	if err != nil || string(got) != `{"name":"n","type":"calico","ipam":{"type": "calico-ipam"}}` {
		t.Fatalf("%s %v", got, err)
	}
}
