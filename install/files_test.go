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
	if err := os.WriteFile(o.Source, []byte("#!/bin/sh\necho capo\n"), 0o755); err != nil {
		t.Fatal(err)
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
	if fi, err := os.Stat(filepath.Join(o.CNIBinDir, "capo-ipam")); err != nil || fi.Mode().Perm() != 0o755 {
		t.Fatalf("binary: %v %v", fi, err)
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
	_ = os.Remove(filepath.Join(o.CNIBinDir, "capo-ipam"))
	rep, err := Check(o)
	if err != nil || !strings.Contains(rep.Problem, "every pod ADD on this node fails") {
		t.Fatalf("%+v %v", rep, err)
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
