package testbed

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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

// Servers are the programs every bed starts, from the pinned modules:
// etcd and kube-apiserver (test/tools), and Calico's CNI (capo's own
// module, which pins Calico). Built together, once.
func Servers(root string, logf func(string, ...any)) (etcd, apiserver, calico string, err error) {
	servers, err := toolsDir(root, "")
	if err != nil {
		return "", "", "", err
	}
	calicoDir, err := cachedDir(root, "calico", root)
	if err != nil {
		return "", "", "", err
	}
	etcd, apiserver, calico = filepath.Join(servers, "etcd"), filepath.Join(servers, "kube-apiserver"), filepath.Join(calicoDir, "calico")
	err = buildAll(logf,
		buildSet{dir: filepath.Join(root, "test", "tools"), outs: map[string]string{
			"go.etcd.io/etcd/server/v3": etcd, "k8s.io/kubernetes/cmd/kube-apiserver": apiserver,
		}},
		buildSet{dir: root, outs: map[string]string{CalicoPkg: calico}},
	)
	return etcd, apiserver, calico, err
}

// BuildBinaries builds whatever the cache lacks. The servers take minutes
// the first time (kube-apiserver is large); later runs reuse them.
// With skipCapo, capo's own binaries are left out (a bed that runs capo
// from its image).
func BuildBinaries(root, workDir string, skipCapo bool, logf func(string, ...any)) (*Binaries, error) {
	etcd, apiserver, calico, err := Servers(root, logf)
	if err != nil {
		return nil, err
	}
	b := &Binaries{Etcd: etcd, KubeAPIServer: apiserver, Calico: calico}
	if skipCapo {
		return b, nil
	}
	b.CapoIPAM, b.CapoIPAMKube = filepath.Join(workDir, "capo-ipam"), filepath.Join(workDir, "capo-ipam-kube")
	b.CapoAgent, b.CapoController = filepath.Join(workDir, "capo-agent"), filepath.Join(workDir, "capo-controller")
	b.CapoInstall, b.Capoctl = filepath.Join(workDir, "capo-install"), filepath.Join(workDir, "capoctl")
	// This checkout's binaries, on every run: one go build, so that their
	// links run side by side.
	capo := buildSet{dir: root, ldflags: releaseLDFlags, quiet: true, outs: map[string]string{
		"./cmd/capo-ipam": b.CapoIPAM, "./cmd/capo-ipam-kube": b.CapoIPAMKube, "./cmd/capo-agent": b.CapoAgent,
		"./cmd/capo-controller": b.CapoController, "./cmd/capo-install": b.CapoInstall, "./cmd/capoctl": b.Capoctl,
	}}
	if err := capo.build(logf); err != nil {
		return nil, err
	}
	return b, nil
}

// toolsDir is the cache directory of the binaries built from the module
// test/tools/<module> ("" for test/tools itself). Its key covers capo's
// go.mod and go.sum too: the tools modules take capo's versions.
func toolsDir(root, module string) (string, error) {
	name := "servers"
	if module != "" {
		name = "tools-" + module
	}
	return cachedDir(root, name, filepath.Join(root, "test", "tools", module), root)
}

// cachedDir is <cache>/<name>-<key>, the key a hash of the go.mod and
// go.sum of each module dir given.
func cachedDir(root, name string, modules ...string) (string, error) {
	cache, err := CacheDir()
	if err != nil {
		return "", err
	}
	var files []string
	for _, m := range modules {
		files = append(files, filepath.Join(m, "go.mod"), filepath.Join(m, "go.sum"))
	}
	key, err := hashFiles(files...)
	if err != nil {
		return "", err
	}
	return filepath.Join(cache, name+"-"+key), nil
}

// BuildTool builds pkg from the module in test/tools/<module> ("" for
// test/tools itself) into the cache, keyed by that module's and capo's
// go.mod and go.sum, unless it is there; it returns the binary's path.
func BuildTool(root, module, pkg, name string, logf func(string, ...any)) (string, error) {
	dir, err := toolsDir(root, module)
	if err != nil {
		return "", err
	}
	out := filepath.Join(dir, name)
	set := buildSet{dir: filepath.Join(root, "test", "tools", module), outs: map[string]string{pkg: out}}
	return out, set.build(logf)
}

// releaseLDFlags strip capo's binaries as `make build` does, so that what
// the beds run (and the benchmarks time) is what a release ships.
const releaseLDFlags = "-s -w"

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

// since is a duration for a log line.
func since(start time.Time) time.Duration { return time.Since(start).Round(time.Second) }
