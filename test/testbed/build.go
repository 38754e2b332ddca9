package testbed

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Binaries are the real programs the bed runs.
type Binaries struct {
	Etcd, KubeAPIServer string // from test/tools, pinned there
	Calico              string // the calico CNI binary; calico-ipam is the same file under another name
	CapoIPAM            string // built from this checkout on every run
	CapoIPAMKube        string // likewise
	CapoAgent           string // likewise
	CapoController      string // likewise
	CapoInstall         string // likewise
	Capoctl             string // likewise
}

// RepoRoot is the directory of capo's go.mod.
func RepoRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", fmt.Errorf("not inside the capo module (go env GOMOD is empty)")
	}
	return filepath.Dir(gomod), nil
}

// CacheDir holds binaries built from pinned modules, reused across runs.
func CacheDir() (string, error) {
	if d := os.Getenv("CAPO_TESTBED_CACHE"); d != "" {
		return d, nil
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("no cache dir: set CAPO_TESTBED_CACHE: %w", err)
	}
	return filepath.Join(d, "capo-testbed"), nil
}

// BuildBinaries builds whatever the cache lacks. The servers take minutes
// the first time (kube-apiserver is large); later runs reuse them.
// With skipCapo, capo's own binaries are left out (a bed that runs capo
// from its image).
func BuildBinaries(root, workDir string, skipCapo bool, logf func(string, ...any)) (*Binaries, error) {
	cache, err := CacheDir()
	if err != nil {
		return nil, err
	}
	tools := filepath.Join(root, "test", "tools")
	toolsKey, err := hashFiles(filepath.Join(tools, "go.mod"), filepath.Join(tools, "go.sum"))
	if err != nil {
		return nil, err
	}
	calicoKey, err := hashFiles(filepath.Join(root, "go.mod"), filepath.Join(root, "go.sum"))
	if err != nil {
		return nil, err
	}
	b := &Binaries{
		Etcd:           filepath.Join(cache, "servers-"+toolsKey, "etcd"),
		KubeAPIServer:  filepath.Join(cache, "servers-"+toolsKey, "kube-apiserver"),
		Calico:         filepath.Join(cache, "calico-"+calicoKey, "calico"),
		CapoIPAM:       filepath.Join(workDir, "capo-ipam"),
		CapoIPAMKube:   filepath.Join(workDir, "capo-ipam-kube"),
		CapoAgent:      filepath.Join(workDir, "capo-agent"),
		CapoController: filepath.Join(workDir, "capo-controller"),
		CapoInstall:    filepath.Join(workDir, "capo-install"),
		Capoctl:        filepath.Join(workDir, "capoctl"),
	}
	steps := []struct{ dir, pkg, out string }{
		{tools, "go.etcd.io/etcd/server/v3", b.Etcd},
		{tools, "k8s.io/kubernetes/cmd/kube-apiserver", b.KubeAPIServer},
		{root, "github.com/projectcalico/calico/cni-plugin/cmd/calico", b.Calico},
	}
	for _, s := range steps {
		if err := buildCached(s.dir, s.pkg, s.out, logf); err != nil {
			return nil, err
		}
	}
	if skipCapo {
		return &Binaries{Etcd: b.Etcd, KubeAPIServer: b.KubeAPIServer, Calico: b.Calico}, nil
	}
	for pkg, out := range map[string]string{"./cmd/capo-ipam": b.CapoIPAM, "./cmd/capo-ipam-kube": b.CapoIPAMKube, "./cmd/capo-agent": b.CapoAgent, "./cmd/capo-controller": b.CapoController, "./cmd/capo-install": b.CapoInstall, "./cmd/capoctl": b.Capoctl} {
		if err := goBuildFlags(root, pkg, out, releaseLDFlags); err != nil {
			return nil, err
		}
	}
	return b, nil
}

// buildCached builds pkg into out unless out exists; a file lock keeps
// concurrent test binaries from building the same thing twice.
func buildCached(dir, pkg, out string, logf func(string, ...any)) error {
	return buildCachedFlags(dir, pkg, out, "", logf)
}

// buildCachedFlags is buildCached with -ldflags.
func buildCachedFlags(dir, pkg, out, ldflags string, logf func(string, ...any)) error {
	if _, err := os.Stat(out); err == nil {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return err
	}
	lock, err := os.OpenFile(out+".lock", os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return err
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN) //nolint:errcheck // closing the file releases the lock anyway
	if _, err := os.Stat(out); err == nil {
		return nil
	}
	logf("testbed: building %s (once; cached in %s)", pkg, filepath.Dir(out))
	start := time.Now()
	tmp := out + ".tmp"
	if err := goBuildFlags(dir, pkg, tmp, ldflags); err != nil {
		return err
	}
	logf("testbed: built %s in %s", filepath.Base(out), time.Since(start).Round(time.Second))
	return os.Rename(tmp, out)
}

// releaseLDFlags strip capo's binaries as `make build` does, so that what
// the beds run (and the benchmarks time) is what a release ships.
const releaseLDFlags = "-s -w"

func goBuildFlags(dir, pkg, out, ldflags string) error {
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags="+ldflags, "-o", out, pkg)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %w\n%s", pkg, err, b)
	}
	return nil
}

func hashFiles(paths ...string) (string, error) {
	h := sha256.New()
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			return "", err
		}
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil))[:12], nil
}
