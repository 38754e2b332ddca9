package calicosuite

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"time"

	"golang.org/x/sys/unix"

	"github.com/capo-net/capo/test/testbed"
)

// FreshEnv, set, runs the plain baseline again even where one is cached.
const FreshEnv = "CAPO_CALICOSUITE_FRESH"

// A plain run's result is a function of what it runs: Calico's compiled
// suite, the calico binary, the servers, host-local, this harness and the
// kernel. None of it is capo's but the hook, which is compiled into the
// suite and passes a plain netconf through untouched. So the baseline is
// kept in the test bed's cache under the hash of all of them, and a run of
// the same things reads it instead of spending half the test running
// plain calico-ipam again. Anything that changes is in the hash, and a
// changed hash runs plain again.

// baselineDir is where the plain runs of these binaries and this harness
// are kept; root is capo's module.
func baselineDir(root string, b *Built) (string, error) {
	h := sha256.New()
	files := []string{b.Suite, b.Bin.Calico, b.Bin.Etcd, b.Bin.KubeAPIServer, b.HostLocal, b.ControllerManager}
	for _, pkg := range []string{"test/calicosuite", "test/calicosuite/testdata", "test/testbed"} {
		src, err := filepath.Glob(filepath.Join(root, pkg, "*.go"))
		if err != nil {
			return "", err
		}
		sort.Strings(src)
		files = append(files, src...)
	}
	for _, f := range files {
		if err := hashFile(h, f); err != nil {
			return "", err
		}
	}
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return "", err
	}
	h.Write(u.Release[:])
	cache, err := testbed.CacheDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(cache, "calicosuite-plain-"+hex.EncodeToString(h.Sum(nil))[:16]), nil
}

func hashFile(h io.Writer, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("calicosuite: hashing the baseline's inputs: %w", err)
	}
	defer f.Close()
	fmt.Fprintf(h, "%s\n", filepath.Base(path))
	_, err = io.Copy(h, f)
	return err
}

// cachedPlain is the plain run on ds kept in dir, if there is one.
func cachedPlain(dir, ds string) (Run, bool) {
	b, err := os.ReadFile(filepath.Join(dir, ds+".json"))
	if err != nil {
		return Run{}, false
	}
	var r Run
	if json.Unmarshal(b, &r) != nil || r.IPAM != PlainIPAM || r.Datastore != ds || r.Err != "" || len(r.Specs) == 0 {
		return Run{}, false
	}
	return r, true
}

// keepPlain keeps the runs that are plain, reported and not themselves
// read from the cache, for the next run of the same inputs.
func keepPlain(dir string, runs []Run) error {
	for _, r := range runs {
		if r.IPAM != PlainIPAM || r.Err != "" || len(r.Specs) == 0 || !r.CachedAt.IsZero() {
			continue
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		r.CachedAt = time.Now().UTC()
		b, err := json.MarshalIndent(r, "", "  ")
		if err != nil {
			return err
		}
		tmp := filepath.Join(dir, fmt.Sprintf(".%s.%d", r.Datastore, os.Getpid()))
		if err := os.WriteFile(tmp, b, 0o644); err != nil {
			return err
		}
		if err := os.Rename(tmp, filepath.Join(dir, r.Datastore+".json")); err != nil {
			return err
		}
	}
	return nil
}
