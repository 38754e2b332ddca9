package cnichain

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/capo-net/capo/install"
	"github.com/capo-net/capo/pkg/journal"
)

// Without the mark of an opt-in (a node never opted in, or opted out when
// the agent last kept its chain) Restore leaves the chain alone; the mark
// comes and goes with the manager's installs and uninstalls.
func TestRestoreOnlyWhereTheNodeWasOptedIn(t *testing.T) {
	state, conf := t.TempDir(), t.TempDir()
	calico := []byte(`{"cniVersion":"0.3.1","name":"k8s-pod-network","plugins":[{"type":"calico","ipam":{"type":"calico-ipam"}}]}`)
	path := filepath.Join(conf, "10-calico.conflist")
	if err := os.WriteFile(path, calico, 0o644); err != nil {
		t.Fatal(err)
	}
	opts := install.Options{CNIConfDir: conf, CNIBinDir: t.TempDir(), Source: "/nonexistent/capo-ipam"}
	if changed, err := Restore(opts, journal.Dir{Root: state}); changed || err != nil {
		t.Fatalf("Restore with no mark: changed %v, %v", changed, err)
	}
	if got, _ := os.ReadFile(path); string(got) != string(calico) {
		t.Fatalf("the conflist changed with no mark: %s", got)
	}

	state = filepath.Join(state, "not-made-yet") // the journal makes it at its first write
	m := &Manager{journal: journal.Dir{Root: state}}
	m.remember(true)
	if _, err := os.Stat(filepath.Join(state, optedInMark)); err != nil {
		t.Fatalf("no mark after an install: %v", err)
	}
	if _, err := Restore(opts, journal.Dir{Root: state}); err == nil {
		t.Fatal("Restore with the mark did not try to install (its source is missing, so it must fail)")
	}
	m.remember(false)
	if _, err := os.Stat(filepath.Join(state, optedInMark)); !os.IsNotExist(err) {
		t.Fatalf("the mark is left after an uninstall: %v", err)
	}
}
