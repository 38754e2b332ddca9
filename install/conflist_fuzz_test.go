package install

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/capo-net/capo/pkg/jsonedit"
)

// FuzzPatchUnpatch: on any bytes in a CNI config directory, installing
// either refuses and leaves them as they were, or wraps the calico
// plugin's ipam block and nothing else; installing again changes nothing,
// and uninstalling gives back the original bytes. Nothing panics.
func FuzzPatchUnpatch(f *testing.F) {
	inputs, _ := filepath.Glob("testdata/*.conf*")
	for _, in := range inputs {
		if data, err := os.ReadFile(in); err == nil {
			f.Add(data)
		}
	}
	f.Add([]byte(`{"name":"n","type":"calico","ipam":{"type":"capo-ipam"}}`))
	f.Add([]byte(`{"type":"calico","ipam":{"type":"capo-ipam","delegate":{"type":"capo-ipam","delegate":{"type":"calico-ipam"}}}}`))
	f.Add([]byte(`{"plugins":[{"type":"calico","ipam":{"type":"calico-ipam"},"ipam":{"type":"calico-ipam"}}]}`))
	f.Add([]byte(`{"plugins":[{"TYPE":"calico","ipam":{"Type":"calico-ipam"}}]}`))
	f.Fuzz(func(t *testing.T, conf []byte) {
		orig := bytes.Clone(conf)
		checkEdit(t, conf, 0)
		if !bytes.Equal(conf, orig) {
			t.Fatal("the input was modified in place")
		}
	})
}

var extra = map[string]any{"agent_socket": "/var/run/capo/agent.sock", "state_dir": "/var/lib/capo"}

// checkEdit asserts the properties on conf, and again on what uninstalling
// an installed conf gives (a chain with capo-ipam inside capo-ipam unwraps
// one level at a time, so depth bounds the recursion).
func checkEdit(t *testing.T, conf []byte, depth int) {
	st, inspectErr := Inspect(conf)
	patched, err := Patch(conf, extra)
	if (err != nil) != (inspectErr != nil) {
		t.Fatalf("Inspect says %v, Patch says %v", inspectErr, err)
	}
	if err != nil {
		if !bytes.Equal(patched, conf) {
			t.Fatalf("a refused config was changed: %v", err)
		}
		if u, uerr := Unpatch(conf); uerr == nil || !bytes.Equal(u, conf) {
			t.Fatalf("uninstall accepted what install refused (%v)", uerr)
		}
		return
	}
	if st.Installed {
		if !bytes.Equal(patched, conf) {
			t.Fatal("installing into an installed config changed it")
		}
		u, err := Unpatch(conf)
		if err != nil {
			return // a clear error: e.g. a delegate key that appears twice
		}
		if !json.Valid(u) {
			t.Fatalf("uninstalling gave invalid JSON: %q", u)
		}
		if depth < 3 {
			checkEdit(t, u, depth+1)
		}
		return
	}
	after, err := Inspect(patched)
	if err != nil || !after.Installed {
		t.Fatalf("installed config does not inspect as installed: %+v %v\n%s", after, err, patched)
	}
	s, e, err := jsonedit.Find(conf, st.IPAMPath...)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(patched[:s], conf[:s]) || !bytes.HasSuffix(patched, conf[e:]) {
		t.Fatal("bytes outside the ipam block changed")
	}
	ds, de, err := jsonedit.Find(patched, append(st.IPAMPath, "delegate")...)
	if err != nil || !bytes.Equal(patched[ds:de], conf[s:e]) {
		t.Fatalf("the delegate is not the original ipam block: %v", err)
	}
	if again, err := Patch(patched, extra); err != nil || !bytes.Equal(again, patched) {
		t.Fatalf("installing twice is not installing once: %v", err)
	}
	if back, err := Unpatch(patched); err != nil || !bytes.Equal(back, conf) {
		t.Fatalf("uninstall did not give back the original bytes (%v):\n%s\n%s", err, conf, back)
	}
	if same, err := Unpatch(conf); err != nil || !bytes.Equal(same, conf) {
		t.Fatalf("uninstalling a config without capo changed it (%v)", err)
	}
}
