package install

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// node lays out a CNI conf dir and bin dir the way calico-node leaves them.
func node(t *testing.T) Options {
	t.Helper()
	root := t.TempDir()
	o := Options{CNIBinDir: filepath.Join(root, "bin"), CNIConfDir: filepath.Join(root, "net.d"), Source: filepath.Join(root, "capo-ipam.new")}
	for _, d := range []string{o.CNIBinDir, o.CNIConfDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	conf, _ := os.ReadFile("testdata/calico-manifest.conflist")
	if err := os.WriteFile(filepath.Join(o.CNIConfDir, "10-calico.conflist"), conf, 0o600); err != nil {
		t.Fatal(err)
	}
	// A later file the runtime must not pick, and a kubeconfig beside it.
	_ = os.WriteFile(filepath.Join(o.CNIConfDir, "99-loopback.conf"), []byte(`{"cniVersion":"0.3.1","name":"lo","type":"loopback"}`), 0o644)
	_ = os.WriteFile(filepath.Join(o.CNIConfDir, "calico-kubeconfig"), []byte("apiVersion: v1"), 0o600)
	o.HelperSource = filepath.Join(root, "capo-ipam-kube.new")
	for _, src := range []string{o.Source, o.HelperSource} {
		if err := os.WriteFile(src, []byte("#!/bin/sh\necho "+filepath.Base(src)+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return o
}

func TestInstallUninstallRoundTrip(t *testing.T) {
	o := node(t)
	conf := filepath.Join(o.CNIConfDir, "10-calico.conflist")
	orig, _ := os.ReadFile(conf)

	r, err := Install(o)
	if err != nil || r.Config != conf || !r.BinaryChanged || !r.ConfigChanged {
		t.Fatalf("install: %+v %v", r, err)
	}
	if fi, _ := os.Stat(conf); fi.Mode().Perm() != 0o600 {
		t.Fatalf("config mode changed to %v", fi.Mode())
	}
	for _, name := range []string{"capo-ipam", "capo-ipam-kube"} {
		if fi, err := os.Stat(filepath.Join(o.CNIBinDir, name)); err != nil || fi.Mode().Perm() != 0o755 {
			t.Fatalf("%s: %v %v", name, fi, err)
		}
	}
	rep, err := Check(o)
	if err != nil || !rep.Installed || !rep.BinaryFresh || rep.Problem != "" {
		t.Fatalf("check after install: %+v %v", rep, err)
	}
	if r, err := Install(o); err != nil || !r.AlreadyCorrect {
		t.Fatalf("second install: %+v %v", r, err)
	}
	entries, _ := os.ReadDir(o.CNIConfDir)
	for _, e := range entries {
		if strings.Contains(e.Name(), "tmp") {
			t.Fatalf("temp file left: %s", e.Name())
		}
	}

	r, err = Uninstall(o)
	if err != nil || !r.ConfigChanged || !r.BinaryRemoved {
		t.Fatalf("uninstall: %+v %v", r, err)
	}
	if back, _ := os.ReadFile(conf); string(back) != string(orig) {
		t.Fatalf("uninstall did not restore the file:\n%s", back)
	}
	if left, _ := os.ReadDir(o.CNIBinDir); len(left) != 0 {
		t.Fatalf("uninstall left %v in the bin dir", left)
	}
	if r, err := Uninstall(o); err != nil || !r.AlreadyCorrect {
		t.Fatalf("second uninstall: %+v %v", r, err)
	}
}

func TestInstallRefusesBeforeTouchingAnything(t *testing.T) {
	o := node(t)
	canal, _ := os.ReadFile("testdata/canal.conflist.refused")
	conf := filepath.Join(o.CNIConfDir, "10-calico.conflist")
	_ = os.WriteFile(conf, canal, 0o600)
	if _, err := Install(o); err == nil || !strings.Contains(err.Error(), "host-local") {
		t.Fatalf("err = %v", err)
	}
	if _, err := os.Stat(filepath.Join(o.CNIBinDir, "capo-ipam")); err == nil {
		t.Fatal("the binary was installed for a config capo refuses")
	}
	if got, _ := os.ReadFile(conf); string(got) != string(canal) {
		t.Fatal("a refused config was changed")
	}
	rep, err := Check(o)
	if err != nil || !strings.Contains(rep.Problem, "host-local") {
		t.Fatalf("check: %+v %v", rep, err)
	}
}

func TestCheckFindsAMissingBinary(t *testing.T) {
	o := node(t)
	if _, err := Install(o); err != nil {
		t.Fatal(err)
	}
	_ = os.Remove(filepath.Join(o.CNIBinDir, "capo-ipam-kube"))
	rep, err := Check(o)
	if err != nil || !strings.Contains(rep.Problem, "capo-ipam-kube is missing: a pod ADD that needs Calico's pool annotations fails") || rep.BinaryExists {
		t.Fatalf("%+v %v", rep, err)
	}
	_ = os.Remove(filepath.Join(o.CNIBinDir, "capo-ipam"))
	rep, err = Check(o)
	if err != nil || !strings.Contains(rep.Problem, "every pod ADD on this node fails") {
		t.Fatalf("%+v %v", rep, err)
	}
	if _, err := Install(o); err != nil {
		t.Fatal(err)
	}
	_ = os.WriteFile(filepath.Join(o.CNIBinDir, "capo-ipam-kube"), []byte("old"), 0o755)
	if rep, err := Check(o); err != nil || rep.BinaryFresh || !strings.Contains(rep.Problem, "capo-ipam-kube differs") {
		t.Fatalf("stale helper: %+v %v", rep, err)
	}
}

func TestRuntimeConfig(t *testing.T) {
	d := t.TempDir()
	if _, err := RuntimeConfig(d); err == nil || !strings.Contains(err.Error(), "no CNI config") {
		t.Fatalf("empty dir: %v", err)
	}
	for _, f := range []string{"20-b.conflist", "10-a.conf", "05-c.txt", ".10-calico.conflist.x.capo-tmp"} {
		_ = os.WriteFile(filepath.Join(d, f), []byte("{}"), 0o644)
	}
	if got, _ := RuntimeConfig(d); filepath.Base(got) != "10-a.conf" {
		t.Fatalf("picked %s", got)
	}
}
