package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCLI(t *testing.T) {
	root := t.TempDir()
	bin, conf := filepath.Join(root, "bin"), filepath.Join(root, "net.d")
	_ = os.MkdirAll(bin, 0o755)
	_ = os.MkdirAll(conf, 0o755)
	orig, _ := os.ReadFile("../../install/testdata/dual-stack.conflist")
	_ = os.WriteFile(filepath.Join(conf, "10-calico.conflist"), orig, 0o644)
	src := filepath.Join(root, "capo-ipam")
	_ = os.WriteFile(src, []byte("binary"), 0o755)
	_ = os.WriteFile(filepath.Join(root, "capo-ipam-kube"), []byte("helper"), 0o755)
	flags := []string{"--cni-bin-dir=" + bin, "--cni-conf-dir=" + conf, "--source=" + src, "--state-dir=/var/lib/capo-alt"}

	var out, errOut bytes.Buffer
	if code := run(append([]string{"check"}, flags...), &out, &errOut); code != 0 || !strings.Contains(out.String(), `"IPAMType": "calico-ipam"`) {
		t.Fatalf("check before install: %d %s %s", code, out.String(), errOut.String())
	}
	out.Reset()
	if code := run(append([]string{"install"}, flags...), &out, &errOut); code != 0 {
		t.Fatalf("install: %d %s", code, errOut.String())
	}
	patched, _ := os.ReadFile(filepath.Join(conf, "10-calico.conflist"))
	if !strings.Contains(string(patched), `"state_dir": "/var/lib/capo-alt"`) {
		t.Fatalf("flags after the subcommand were ignored:\n%s", patched)
	}
	out.Reset()
	if code := run(append(flags, "check"), &out, &errOut); code != 0 || !strings.Contains(out.String(), `"Installed": true`) {
		t.Fatalf("check after install: %d %s", code, out.String())
	}
	_ = os.Remove(filepath.Join(bin, "capo-ipam"))
	out.Reset()
	if code := run(append([]string{"check"}, flags...), &out, &errOut); code != 1 || !strings.Contains(out.String(), "missing") {
		t.Fatalf("check with the binary gone: %d %s", code, out.String())
	}
	if code := run(append([]string{"uninstall"}, flags...), &out, &errOut); code != 0 {
		t.Fatalf("uninstall: %d %s", code, errOut.String())
	}
	if back, _ := os.ReadFile(filepath.Join(conf, "10-calico.conflist")); string(back) != string(orig) {
		t.Fatal("uninstall did not restore the original")
	}
	if left, _ := os.ReadDir(bin); len(left) != 0 {
		t.Fatalf("uninstall left %v", left)
	}
	if code := run([]string{"frobnicate"}, &out, &errOut); code != 2 {
		t.Fatalf("unknown command: %d", code)
	}
}
