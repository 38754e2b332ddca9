// Package calicosuite runs Calico's own CNI test suite (cni-plugin/tests in
// the Calico module capo pins) twice on each datastore: with plain
// calico-ipam, and with capo-ipam in front of it, the netconf of every
// plugin call rewritten as capo's installer rewrites a node's conflist. A
// spec that passes plain must pass with capo, but for the documented
// limits (limits.go).
//
// The suite is compiled inside capo's module, so it reuses capo's build
// cache and its Calico and Kubernetes versions. Nothing of Calico's is
// changed on disk or committed: go test's -overlay swaps in a rewritten copy
// of one helper file and adds capo's hook (testdata/capohook.go), both
// written to a temporary directory at test time.
package calicosuite

import (
	"bytes"
	_ "embed" // the hook added to Calico's testutils
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// SuitePackage is where the harness builds Calico's suite: a package of
// capo's module that exists only in the overlay (WriteOverlay), holding
// temporary copies of cni-plugin/tests and of the cni-plugin/internal
// packages they import, so that they compile in capo's module (the go
// command refuses an overlay of files in the module cache).
const SuitePackage = "github.com/capo-net/capo/test/calicosuite/cnisuite"

// calicoInternal is the import path prefix the copies are moved from.
const calicoInternal = "github.com/projectcalico/calico/cni-plugin/internal/"

// hookedFuncs are the functions of Calico's testutils (utils_linux.go)
// through which every netconf reaches a plugin: the IPAM plugin run alone,
// and the calico plugin's ADD and DEL. Every other helper calls these.
var hookedFuncs = []string{"RunIPAMPlugin", "RunCNIPluginWithId", "DeleteContainerWithIdAndIfaceName"}

//go:embed testdata/capohook.go
var hookSource []byte

// HookNetconfs returns utils_linux.go with each of hookedFuncs starting
// with `netconf = capoNetconf(netconf)`. It fails, naming what it missed,
// when Calico's helpers no longer take the netconf so: the harness must
// then learn their new form rather than run the suite unhooked.
func HookNetconfs(src []byte) ([]byte, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "utils_linux.go", src, 0)
	if err != nil {
		return nil, fmt.Errorf("parsing Calico's testutils: %w", err)
	}
	var at []int
	for _, d := range f.Decls {
		fn, ok := d.(*ast.FuncDecl)
		if !ok || fn.Recv != nil || fn.Body == nil || !slices.Contains(hookedFuncs, fn.Name.Name) {
			continue
		}
		if !takesStringParam(fn, "netconf") {
			return nil, fmt.Errorf("testutils.%s of Calico's suite takes no netconf string: update the harness's hook", fn.Name.Name)
		}
		at = append(at, fset.Position(fn.Body.Lbrace).Offset+1)
	}
	if len(at) != len(hookedFuncs) {
		return nil, fmt.Errorf("the testutils of Calico's suite have %d of %v: update the harness's hook", len(at), hookedFuncs)
	}
	out := slices.Clone(src)
	for _, off := range slices.Backward(at) {
		out = slices.Insert(out, off, []byte("\n\tnetconf = capoNetconf(netconf)")...)
	}
	return out, nil
}

func takesStringParam(fn *ast.FuncDecl, name string) bool {
	for _, field := range fn.Type.Params.List {
		id, ok := field.Type.(*ast.Ident)
		if !ok || id.Name != "string" {
			continue
		}
		if slices.ContainsFunc(field.Names, func(n *ast.Ident) bool { return n.Name == name }) {
			return true
		}
	}
	return false
}

// WriteOverlay copies Calico's suite (cni-plugin/tests, and the
// cni-plugin/internal packages it imports) from the Calico module at
// calicoDir into dir, moved under SuitePackage in capo's module at root,
// with the netconf hook; it writes the overlay that puts the copies there
// and returns its path, for go test -overlay.
func WriteOverlay(root, calicoDir, dir string) (string, error) {
	files, err := suiteFiles(calicoDir)
	if err != nil {
		return "", err
	}
	files["internal/pkg/testutils/zz_capo_hook.go"] = hookSource
	replace := map[string]string{}
	for rel, b := range files {
		p := filepath.Join(dir, "cnisuite", filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return "", err
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			return "", err
		}
		replace[filepath.Join(root, "test", "calicosuite", "cnisuite", filepath.FromSlash(rel))] = p
	}
	b, err := json.Marshal(map[string]any{"Replace": replace})
	if err != nil {
		return "", err
	}
	overlay := filepath.Join(dir, "overlay.json")
	return overlay, os.WriteFile(overlay, b, 0o644)
}

// suiteFiles reads the suite's files, by path under SuitePackage: the
// tests at its top, cni-plugin/internal's Go files under internal/, every
// import of those moved with them, and the netconf helpers hooked.
func suiteFiles(calicoDir string) (map[string][]byte, error) {
	files := map[string][]byte{}
	tests, err := filepath.Glob(filepath.Join(calicoDir, "cni-plugin", "tests", "*_test.go"))
	if err != nil || len(tests) == 0 {
		return nil, fmt.Errorf("no Calico CNI suite in %s (%v)", calicoDir, err)
	}
	for _, f := range tests {
		if files[filepath.Base(f)], err = os.ReadFile(f); err != nil {
			return nil, err
		}
	}
	internal := filepath.Join(calicoDir, "cni-plugin", "internal")
	err = filepath.WalkDir(internal, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return err
		}
		rel, _ := filepath.Rel(internal, p)
		files["internal/"+filepath.ToSlash(rel)], err = os.ReadFile(p)
		return err
	})
	if err != nil {
		return nil, err
	}
	for rel, b := range files {
		files[rel] = bytes.ReplaceAll(b, []byte(`"`+calicoInternal), []byte(`"`+SuitePackage+"/internal/"))
	}
	hooked, err := HookNetconfs(files["internal/pkg/testutils/utils_linux.go"])
	files["internal/pkg/testutils/utils_linux.go"] = hooked
	return files, err
}

// moduleDir is where the go command keeps module (as capo's go.mod pins it).
func moduleDir(root, module string) (string, error) {
	out, err := goCmd(root, "list", "-m", "-f", "{{.Dir}}", module)
	if err != nil {
		return "", err
	}
	dir := strings.TrimSpace(out)
	if dir == "" {
		return "", fmt.Errorf("%s is not in the module cache; run go mod download %s", module, module)
	}
	return dir, nil
}
