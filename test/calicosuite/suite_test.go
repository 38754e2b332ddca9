package calicosuite

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/capo-net/capo/test/testbed"
)

// TestMain runs the harness's inside half when the test binary is started
// again in the harness's namespaces.
func TestMain(m *testing.M) {
	if dir := os.Getenv(InsideEnv); dir != "" {
		os.Exit(Inside(dir))
	}
	os.Exit(m.Run())
}

// Calico's own CNI suite passes with capo-ipam in the IPAM slot: every spec
// that passes with plain calico-ipam passes with capo on both datastores,
// but the documented limits.
func TestCalicoSuite(t *testing.T) {
	if testing.Short() {
		t.Skip("calicosuite: -short given, skipping Calico's CNI suite")
	}
	if os.Geteuid() != 0 {
		t.Skip("calicosuite: not root, skipping Calico's CNI suite (it runs in network and mount namespaces of its own, creating veths; run as root)")
	}
	root, err := testbed.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := workDir(t)
	start := time.Now()
	built, err := Build(root, dir, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("calicosuite: built in %s (Calico's suite: %s)", time.Since(start).Round(time.Second), built.SuiteBuild.Round(time.Second))
	if built.Baseline, err = baselineDir(root, built); err != nil {
		t.Fatal(err)
	}
	built.Plain = map[string]Run{}
	for _, ds := range testbed.Datastores {
		if r, ok := cachedPlain(built.Baseline, string(ds)); ok && os.Getenv(FreshEnv) == "" {
			built.Plain[string(ds)] = r
		}
	}
	if err := WriteBuilt(dir, built); err != nil {
		t.Fatal(err)
	}
	runs := runInside(t, dir)
	if err := keepPlain(built.Baseline, runs); err != nil {
		t.Logf("calicosuite: the plain runs not kept for the next run: %v", err)
	}
	for _, line := range Table(runs) {
		t.Log(line)
	}
	checkRuns(t, runs)
}

// runInside runs the harness's inside half in its namespaces and returns
// what it reported.
func runInside(t *testing.T, dir string) []Run {
	t.Helper()
	defer runtime.UnlockOSThread()
	cmd, err := StartPrivate([]string{os.Args[0]}, append(os.Environ(), InsideEnv+"="+dir))
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("calicosuite: the runs failed: %v (logs in %s)", err, dir)
	}
	runs, err := ReadResults(dir)
	if err != nil {
		t.Fatal(err)
	}
	return runs
}

// checkRuns fails on a run that did not report and on every spec that
// passes plain but not with capo, but the documented limits.
func checkRuns(t *testing.T, runs []Run) {
	t.Helper()
	for _, r := range runs {
		if r.Err != "" || len(r.Specs) == 0 {
			t.Errorf("calicosuite: %s on %s reported no specs: %s", r.IPAM, r.Datastore, r.Err)
		}
	}
	for _, r := range runs {
		if r.IPAM == PlainIPAM && r.Count(Failed) > 0 {
			t.Logf("calicosuite: %d specs fail with plain calico-ipam on %s too, so capo is not judged on them: %s", r.Count(Failed), r.Datastore, strings.Join(r.Names(Failed), "; "))
		}
	}
	found := Compare(runs, Limits)
	for _, f := range append(found.Limited, found.Flaky...) {
		t.Log("calicosuite: " + f.String())
	}
	for _, f := range found.Regressions {
		t.Error("calicosuite: " + f.String())
	}
}

// workDir holds the binaries, the runs' logs and reports; it is removed
// after a run that passed, unless CAPO_TESTBED_KEEP is set. One a killed
// run left is removed by the next.
func workDir(t *testing.T) string {
	t.Helper()
	sweepWorkDirs()
	dir, err := os.MkdirTemp("", fmt.Sprintf("%s%d-", workDirPrefix, os.Getpid()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() || os.Getenv("CAPO_TESTBED_KEEP") != "" {
			t.Logf("calicosuite: logs and reports kept in %s", dir)
			return
		}
		_ = os.RemoveAll(dir)
	})
	return dir
}

const workDirPrefix = "capo-calicosuite-"

// sweepWorkDirs removes the work dirs of harnesses that are no longer
// running (their pid is in the name).
func sweepWorkDirs() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), workDirPrefix+"*"))
	for _, d := range dirs {
		pid, err := strconv.Atoi(strings.SplitN(strings.TrimPrefix(filepath.Base(d), workDirPrefix), "-", 2)[0])
		if err == nil && pid > 0 && syscall.Kill(pid, 0) != nil {
			_ = os.RemoveAll(d)
		}
	}
}
