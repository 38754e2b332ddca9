package calicosuite

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/capo-net/capo/test/testbed"
)

// InsideEnv names the work dir to a re-run of the harness's test binary
// inside its namespaces: set, TestMain runs Inside instead of the tests.
const InsideEnv = "CAPO_CALICOSUITE_INSIDE"

// Files the parent and the child share in the work dir.
const (
	builtFile   = "built.json"
	resultsFile = "results.json"
)

// WriteBuilt hands the child what the parent built.
func WriteBuilt(dir string, b *Built) error {
	return writeJSON(filepath.Join(dir, builtFile), b)
}

// ReadResults reads the runs the child reported.
func ReadResults(dir string) ([]Run, error) {
	b, err := os.ReadFile(filepath.Join(dir, resultsFile))
	if err != nil {
		return nil, fmt.Errorf("the runs reported nothing (see the output above): %w", err)
	}
	var runs []Run
	return runs, json.Unmarshal(b, &runs)
}

// Inside is the child's whole life, in its own namespaces: a private host,
// the servers, then the suite on each datastore, plain and with capo. It
// returns the process's exit code; the runs' results go to the work dir.
func Inside(dir string) int {
	logf := func(f string, a ...any) { log.Printf(f, a...) }
	if err := inside(dir, logf); err != nil {
		fmt.Fprintln(os.Stderr, "calicosuite:", err)
		return 1
	}
	return 0
}

func inside(dir string, logf func(string, ...any)) error {
	var built Built
	b, err := os.ReadFile(filepath.Join(dir, builtFile))
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, &built); err != nil {
		return err
	}
	if err := SetUpPrivateHost(); err != nil {
		return err
	}
	// Calico's netconfs dial etcd at $ETCD_IP:2379: the port is free in
	// these namespaces. Its specs expect a pod's default service account
	// filled in, as the admission plugin does (kube-controller-manager
	// creates the accounts). The binaries are built already: there is no
	// network here.
	opts := testbed.Options{EtcdPort: 2379, ServiceAccounts: true, NoCapoBinaries: true}
	bed, err := testbed.StartWith(context.Background(), logf, opts)
	if err != nil {
		return err
	}
	defer bed.Stop()
	h := &host{bed: bed, built: &built, dir: dir, logf: logf}
	if err := h.setUp(); err != nil {
		return err
	}
	var runs []Run
	for _, ds := range testbed.Datastores {
		runs = append(runs, h.datastore(string(ds))...)
	}
	return writeJSON(filepath.Join(dir, resultsFile), runs)
}

// datastore runs the suite plain and with capo on ds. The specs that pass
// plain and fail with capo, but the documented limits, run once more on
// their own: two cores under load can push a plugin call past the 5 s
// Calico's helpers give it, and one spec's failure can leave state that
// fails the next.
func (h *host) datastore(ds string) []Run {
	plain, kept := h.built.Plain[ds]
	if kept {
		h.logf("calicosuite: %s-%s: the baseline of these same binaries and harness, run %s (%s=1 runs it again)", ds, PlainIPAM, plain.CachedAt.Format(time.DateTime), FreshEnv)
	} else {
		plain = h.run(ds, PlainIPAM, nil)
	}
	capo := h.run(ds, CapoIPAM, nil)
	var suspects []string
	for _, f := range Compare([]Run{plain, capo}, Limits).Regressions {
		suspects = append(suspects, f.Spec)
	}
	if len(suspects) > 0 {
		h.logf("calicosuite: %d specs passed plain and failed with capo on %s: running them again on their own", len(suspects), ds)
		retry := h.run(ds, CapoIPAM, suspects)
		capo.Retry, capo.RetryTook = retry.Specs, retry.Took
	}
	return []Run{plain, capo}
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}
