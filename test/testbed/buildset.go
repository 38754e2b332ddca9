package testbed

import (
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"
)

// A buildSet is binaries built from one module by one `go build`: the
// go command compiles what they share once and runs their links side by
// side, where a build per binary would link them one after another.
type buildSet struct {
	dir     string            // the module's directory
	ldflags string            // for every binary of the set
	outs    map[string]string // package -> the binary's path
	quiet   bool              // no log lines (capo's own binaries, built on every run)
}

// buildAll builds each set, one after another (each uses every core).
func buildAll(logf func(string, ...any), sets ...buildSet) error {
	for _, s := range sets {
		if err := s.build(logf); err != nil {
			return err
		}
	}
	return nil
}

// build builds the binaries the set lacks. A file lock in each output's
// directory keeps two test binaries (or a test and `make prebuild`) from
// building the same thing at once: the second waits, then finds it built.
func (s buildSet) build(logf func(string, ...any)) error {
	if len(s.missing()) == 0 {
		return nil
	}
	unlock, err := lockDirs(s.outs)
	if err != nil {
		return err
	}
	defer unlock()
	missing := s.missing()
	if len(missing) == 0 {
		return nil
	}
	tmp, err := os.MkdirTemp(filepath.Dir(s.outs[missing[0]]), ".build-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	if !s.quiet {
		logf("testbed: building %s (once; cached in %s)", names(s.outs, missing), filepath.Dir(s.outs[missing[0]]))
	}
	start := time.Now()
	// -s -w: no symbol table or DWARF. Nothing reads them from a test
	// program, and writing them is much of each link of a large server.
	args := append([]string{"build", "-trimpath", "-ldflags=-s -w " + s.ldflags, "-o", tmp + "/"}, missing...)
	cmd := exec.Command("go", args...)
	cmd.Dir = s.dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s (in %s): %w\n%s", strings.Join(missing, " "), s.dir, err, b)
	}
	for _, pkg := range missing {
		if err := os.Rename(filepath.Join(tmp, binaryName(pkg)), s.outs[pkg]); err != nil {
			return err
		}
	}
	if !s.quiet {
		logf("testbed: built %s in %s", names(s.outs, missing), since(start))
	}
	return nil
}

// missing lists the set's packages whose binary is not there yet, sorted.
func (s buildSet) missing() []string {
	var pkgs []string
	for pkg, out := range s.outs {
		if _, err := os.Stat(out); err != nil {
			pkgs = append(pkgs, pkg)
		}
	}
	sort.Strings(pkgs)
	return pkgs
}

var majorVersion = regexp.MustCompile(`^v[0-9]+$`)

// binaryName is the file go build -o dir/ writes for pkg: the last
// element of its path, or the one before a major-version suffix.
func binaryName(pkg string) string {
	base := path.Base(pkg)
	if majorVersion.MatchString(base) {
		base = path.Base(path.Dir(pkg))
	}
	return base
}

func names(outs map[string]string, pkgs []string) string {
	var n []string
	for _, p := range pkgs {
		n = append(n, filepath.Base(outs[p]))
	}
	return strings.Join(n, ", ")
}

// lockDirs takes the build lock of every output directory of outs, in
// order, and returns what releases them.
func lockDirs(outs map[string]string) (func(), error) {
	dirs := map[string]bool{}
	for _, out := range outs {
		dirs[filepath.Dir(out)] = true
	}
	var sorted []string
	for d := range dirs {
		sorted = append(sorted, d)
	}
	sort.Strings(sorted)
	var held []*os.File
	unlock := func() {
		for _, f := range held {
			f.Close() // closing releases the lock
		}
	}
	for _, d := range sorted {
		if err := os.MkdirAll(d, 0o755); err != nil {
			unlock()
			return nil, err
		}
		f, err := lockFile(filepath.Join(d, ".build.lock"))
		if err != nil {
			unlock()
			return nil, err
		}
		held = append(held, f)
	}
	return unlock, nil
}
