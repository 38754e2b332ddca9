package calicosuite

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/capo-net/capo/test/testbed"
)

// The baseline's place changes with any of its inputs: a binary the plain
// run runs, or the harness's code.
func TestBaselineDirFollowsItsInputs(t *testing.T) {
	t.Setenv("CAPO_TESTBED_CACHE", t.TempDir())
	root, bins := t.TempDir(), t.TempDir()
	write := func(path, body string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b := &Built{Bin: &testbed.Binaries{}}
	names := []string{"suite", "calico", "etcd", "apiserver", "host-local", "kcm"}
	for i, f := range []*string{&b.Suite, &b.Bin.Calico, &b.Bin.Etcd, &b.Bin.KubeAPIServer, &b.HostLocal, &b.ControllerManager} {
		*f = filepath.Join(bins, names[i])
		write(*f, names[i])
	}
	write(filepath.Join(root, "test/testbed/bed.go"), "package testbed")
	dir := func() string {
		t.Helper()
		d, err := baselineDir(root, b)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	first := dir()
	if again := dir(); again != first {
		t.Fatalf("the same inputs hash to %s and %s", first, again)
	}
	write(b.Bin.Calico, "another calico")
	second := dir()
	if second == first {
		t.Fatal("a changed calico binary kept the baseline's place")
	}
	write(filepath.Join(root, "test/testbed/bed.go"), "package testbed // changed")
	if dir() == second {
		t.Fatal("a changed harness file kept the baseline's place")
	}
	if _, err := baselineDir(root, &Built{Bin: &testbed.Binaries{}}); err == nil {
		t.Fatal("missing binaries hashed without an error")
	}
}

// Plain runs that reported are kept and read back, marked kept; a run that
// did not report, a capo run, and a run already read from the cache are not
// written.
func TestBaselineKeepsReportedPlainRuns(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "plain")
	specs := []Spec{{Name: "a", State: Passed}, {Name: "b", State: Failed, Message: "host-local"}}
	runs := []Run{
		{Datastore: "kubernetes", IPAM: PlainIPAM, Specs: specs, Took: time.Minute},
		{Datastore: "kubernetes", IPAM: CapoIPAM, Specs: specs},
		{Datastore: "etcdv3", IPAM: PlainIPAM, Err: "the suite wrote no report"},
	}
	if err := keepPlain(dir, runs); err != nil {
		t.Fatal(err)
	}
	got, ok := cachedPlain(dir, "kubernetes")
	if !ok || got.CachedAt.IsZero() || len(got.Specs) != 2 || got.Specs[1].State != Failed || got.Took != time.Minute {
		t.Fatalf("kept kubernetes run: %+v, %v", got, ok)
	}
	if _, ok := cachedPlain(dir, "etcdv3"); ok {
		t.Fatal("a run that did not report was kept")
	}
	at := got.CachedAt
	got.Took = 2 * time.Minute
	if err := keepPlain(dir, []Run{got}); err != nil {
		t.Fatal(err)
	}
	if again, _ := cachedPlain(dir, "kubernetes"); !again.CachedAt.Equal(at) || again.Took != time.Minute {
		t.Fatalf("a run read from the cache was written back: %+v", again)
	}
	if err := os.WriteFile(filepath.Join(dir, "etcdv3.json"), []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, ok := cachedPlain(dir, "etcdv3"); ok {
		t.Fatal("an unreadable baseline was used")
	}
}
