package testbed

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"
)

// The release before this one, for the upgrade and skew tests: built from
// its commit at test time and cached. 0.1.0 has no tag (CHANGELOG.md); its
// commit is main's state before the wire was versioned. Moving to the next
// release is one change here, and a recording (pkg/wire/testdata/record).
const (
	PreviousRelease = "0.1.0"
	PreviousCommit  = "452ff27be83ff8639ec66b1770c63630cd6e19d9"
)

// PreviousBinaries are the previous release's host and agent binaries.
type PreviousBinaries struct {
	Source                                      string // its tree, as `git archive` gives it
	CapoIPAM, CapoIPAMKube, CapoAgent, Capoctrl string
}

// PreviousDir is where the previous release's tree and builds are cached,
// keyed by this checkout's go.mod and go.sum too, which it builds with.
func PreviousDir() (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	return cachedDir(root, "capo-"+PreviousRelease+"-"+PreviousCommit[:12], root)
}

// PreviousSource extracts the previous release's tree from this clone's
// history, once.
func PreviousSource(logf func(string, ...any)) (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	dir, err := PreviousDir()
	if err != nil {
		return "", err
	}
	src := filepath.Join(dir, "src")
	err = Once(src, logf, func(tmp string) error {
		if err := os.MkdirAll(tmp, 0o755); err != nil {
			return err
		}
		if err := havePrevious(root, logf); err != nil {
			return err
		}
		cmd := exec.Command("sh", "-c", `git -C "$1" archive "$2" | tar -x -C "$3"`, "sh", root, PreviousCommit, tmp)
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("git archive %s: %v %s", PreviousCommit, err, out)
		}
		return withCurrentModules(root, tmp)
	})
	return src, err
}

// withCurrentModules gives the previous release's tree this checkout's
// go.mod and go.sum. The release's own code is what the tests across
// releases are about (its wire, its records, its objects); its
// dependencies then resolve to the versions capo's build has compiled
// already, so building it compiles capo's packages alone, not a second
// copy of client-go and Calico's libraries. Every module it imports is
// still required there (the release's requirements are a subset).
func withCurrentModules(root, tree string) error {
	for _, f := range []string{"go.mod", "go.sum"} {
		if err := copyFile(filepath.Join(root, f), filepath.Join(tree, f), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// ErrPreviousMissing is returned when the clone does not have the previous
// release's commit and cannot fetch it (a shallow copy with no origin):
// the tests across releases then say so and skip, as they cannot build it.
var ErrPreviousMissing = errors.New("the previous release's commit is not in this clone")

type skipper interface {
	Helper()
	Skipf(format string, args ...any)
	Fatal(args ...any)
}

// SkipWithoutPrevious skips t when err is ErrPreviousMissing, else fails it
// on err.
func SkipWithoutPrevious(t skipper, err error) {
	t.Helper()
	switch {
	case errors.Is(err, ErrPreviousMissing):
		t.Skipf("cannot build the previous release here: %v", err)
	case err != nil:
		t.Fatal(err)
	}
}

// havePrevious makes sure the clone has the previous release's commit: a
// shallow CI checkout fetches it from origin.
func havePrevious(root string, logf func(string, ...any)) error {
	has := func() bool {
		return exec.Command("git", "-C", root, "cat-file", "-e", PreviousCommit+"^{commit}").Run() == nil
	}
	if has() {
		return nil
	}
	logf("testbed: fetching %s's commit %s from origin", PreviousRelease, PreviousCommit)
	out, err := exec.Command("git", "-C", root, "fetch", "--quiet", "origin", PreviousCommit).CombinedOutput()
	if err != nil || !has() {
		return fmt.Errorf("%w: %s could not be fetched (%v %s); run git fetch --unshallow", ErrPreviousMissing, PreviousCommit, err, out)
	}
	return nil
}

// BuildPrevious builds the previous release's capo-ipam, capo-ipam-kube,
// capo-agent and capo-controller, stamped with its version, once.
func BuildPrevious(logf func(string, ...any)) (*PreviousBinaries, error) {
	src, err := PreviousSource(logf)
	if err != nil {
		return nil, err
	}
	dir, err := PreviousDir()
	if err != nil {
		return nil, err
	}
	p := &PreviousBinaries{
		Source: src, CapoIPAM: filepath.Join(dir, "capo-ipam"), CapoIPAMKube: filepath.Join(dir, "capo-ipam-kube"),
		CapoAgent: filepath.Join(dir, "capo-agent"), Capoctrl: filepath.Join(dir, "capo-controller"),
	}
	set := buildSet{dir: src, ldflags: releaseLDFlags + " -X github.com/capo-net/capo/pkg/version.Version=" + PreviousRelease, outs: map[string]string{
		"./cmd/capo-ipam": p.CapoIPAM, "./cmd/capo-ipam-kube": p.CapoIPAMKube, "./cmd/capo-agent": p.CapoAgent, "./cmd/capo-controller": p.Capoctrl,
	}}
	return p, set.build(logf)
}

// Once makes path with build (given a temporary path beside it, renamed
// into place on success) unless path exists; a file lock keeps concurrent
// test binaries from making it twice.
func Once(path string, logf func(string, ...any), build func(tmp string) error) error {
	if _, err := os.Stat(path); err == nil {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	lock, err := lockFile(path + ".lock")
	if err != nil {
		return err
	}
	defer lock.Close()
	if _, err := os.Stat(path); err == nil {
		return nil
	}
	start := time.Now()
	tmp := path + ".tmp"
	if err := os.RemoveAll(tmp); err != nil {
		return err
	}
	if err := build(tmp); err != nil {
		return err
	}
	logf("testbed: made %s in %s (once; cached)", path, time.Since(start).Round(time.Second))
	return os.Rename(tmp, path)
}

// UsePrevious gives the env's node the previous release's capo-ipam and
// capo-ipam-kube beside this Calico's binaries, as a host looks before its
// agent is upgraded (or after one is rolled back): sandboxes made from now
// on run it.
func (e *Env) UsePrevious(p *PreviousBinaries) {
	e.BinDir = e.capoBinDir("bin-previous", p.CapoIPAM, p.CapoIPAMKube)
}

// UseCurrent gives the node this checkout's capo-ipam again.
func (e *Env) UseCurrent() {
	e.BinDir = e.capoBinDir("bin-current", e.Bed.Bin.CapoIPAM, e.Bed.Bin.CapoIPAMKube)
}

func (e *Env) capoBinDir(name, ipam, kube string) string {
	e.T.Helper()
	dir := filepath.Join(e.Dir, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		e.T.Fatal(err)
	}
	files := map[string]string{"capo-ipam": ipam, "capo-ipam-kube": kube}
	if e.BinDir != dir { // this Calico release's binaries, from the node's bin dir so far
		calico := filepath.Join(e.BinDir, "calico")
		files["calico"], files["calico-ipam"] = calico, calico
	}
	for n, src := range files {
		if err := copyFile(src, filepath.Join(dir, n), 0o755); err != nil {
			e.T.Fatal(err)
		}
	}
	return dir
}

// UseBinDir has the sandbox's next CNI calls run the binaries in dir: a
// host whose capo-ipam was replaced between a sandbox's ADD and its DEL.
func (s *Sandbox) UseBinDir(dir string) { s.cni.Path = []string{dir} }
