package calicosuite

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/capo-net/capo/test/testbed"
)

// The copy of the pinned Calico's suite imports none of Calico's internal
// packages any more, only their copies, and has the hook.
func TestSuiteFilesOfPinnedCalico(t *testing.T) {
	root, err := testbed.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	calico, err := moduleDir(root, "github.com/projectcalico/calico")
	if err != nil {
		t.Fatal(err)
	}
	files, err := suiteFiles(calico)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"calico_cni_suite_test.go", "calico_cni_k8s_test.go", "internal/pkg/testutils/utils_linux.go", "internal/pkg/utils/utils.go"} {
		if files[f] == nil {
			t.Errorf("no %s in the copy", f)
		}
	}
	for name, b := range files {
		if strings.Contains(string(b), calicoInternal) {
			t.Errorf("%s still imports Calico's internal packages", name)
		}
	}
	if !strings.Contains(string(files["internal/pkg/testutils/utils_linux.go"]), "netconf = capoNetconf(netconf)") {
		t.Error("testutils is not hooked")
	}
}

// The hook goes into each helper that hands a netconf to a plugin, in
// the pinned Calico's own file, and nowhere else.
func TestHookNetconfsInPinnedCalico(t *testing.T) {
	root, err := testbed.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	calico, err := moduleDir(root, "github.com/projectcalico/calico")
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile(filepath.Join(calico, "cni-plugin", "internal", "pkg", "testutils", "utils_linux.go"))
	if err != nil {
		t.Fatal(err)
	}
	out, err := HookNetconfs(src)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(out), "netconf = capoNetconf(netconf)"); n != len(hookedFuncs) {
		t.Fatalf("%d hooks, want %d", n, len(hookedFuncs))
	}
	if strings.ReplaceAll(string(out), "\n\tnetconf = capoNetconf(netconf)", "") != string(src) {
		t.Fatal("the rewrite changed more than the hooks")
	}
}

// A helper that no longer takes its netconf so fails the rewrite, naming
// it: the suite never runs unhooked.
func TestHookNetconfsRefusesANewForm(t *testing.T) {
	src := "package testutils\n\nfunc RunIPAMPlugin(conf []byte, command string) {}\nfunc RunCNIPluginWithId(netconf string) {}\n"
	if _, err := HookNetconfs([]byte(src)); err == nil || !strings.Contains(err.Error(), "RunIPAMPlugin of Calico's suite takes no netconf") {
		t.Fatalf("err = %v", err)
	}
	src = "package testutils\n\nfunc RunIPAMPlugin(netconf, command string) {}\n"
	if _, err := HookNetconfs([]byte(src)); err == nil || !strings.Contains(err.Error(), "have 1 of") {
		t.Fatalf("err = %v", err)
	}
}

func TestReadJUnit(t *testing.T) {
	report := filepath.Join(t.TempDir(), "r.xml")
	xml := `<?xml version="1.0" encoding="UTF-8"?>
<testsuite name="CNI suite" tests="4" failures="1" errors="0" time="3">
  <testcase name="A works" classname="CNI suite" time="1"></testcase>
  <testcase name="A works" classname="CNI suite" time="1"><failure type="Failure">at x.go:1
Expected 0 to equal 1</failure></testcase>
  <testcase name="B on etcd only" classname="CNI suite" time="0"><skipped></skipped></testcase>
</testsuite>`
	if err := os.WriteFile(report, []byte(xml), 0o644); err != nil {
		t.Fatal(err)
	}
	specs, err := ReadJUnit(report)
	if err != nil {
		t.Fatal(err)
	}
	want := []Spec{{Name: "A works", State: Passed}, {Name: "A works #2", State: Failed, Message: "at x.go:1 Expected 0 to equal 1"}, {Name: "B on etcd only", State: Skipped}}
	if len(specs) != len(want) {
		t.Fatalf("%+v", specs)
	}
	for i := range want {
		if specs[i] != want[i] {
			t.Fatalf("spec %d: %+v, want %+v", i, specs[i], want[i])
		}
	}
}

// Only a spec that passes plain and not with capo is a finding; a limit
// explains it by the start of its name, and one that passed when run again
// on its own is a flake; on the datastore it happens on.
func TestCompare(t *testing.T) {
	plain := Run{Datastore: "kubernetes", IPAM: PlainIPAM, Specs: []Spec{
		{Name: "kept", State: Passed},
		{Name: "broken by capo", State: Passed},
		{Name: "limit x", State: Passed},
		{Name: "fails plain too", State: Failed},
		{Name: "skipped", State: Skipped},
		{Name: "lost", State: Passed},
		{Name: "slow once", State: Passed},
	}}
	capo := Run{Datastore: "kubernetes", IPAM: CapoIPAM, Specs: []Spec{
		{Name: "kept", State: Passed},
		{Name: "broken by capo", State: Failed, Message: "exit 1"},
		{Name: "limit x", State: Failed},
		{Name: "fails plain too", State: Failed},
		{Name: "skipped", State: Skipped},
		{Name: "slow once", State: Failed},
	}, Retry: []Spec{{Name: "broken by capo", State: Failed}, {Name: "slow once", State: Passed}}}
	etcd := Run{Datastore: "etcdv3", IPAM: PlainIPAM, Specs: []Spec{{Name: "kept", State: Passed}}}
	found := Compare([]Run{plain, capo, etcd}, map[string]string{"limit": "why"})
	var got []string
	for _, f := range found.Regressions {
		got = append(got, f.Datastore+"/"+f.Spec+"/"+f.Got)
	}
	if strings.Join(got, ",") != "etcdv3/kept/missing,kubernetes/broken by capo/failed: exit 1,kubernetes/lost/missing" {
		t.Fatalf("regressions %v", got)
	}
	if len(found.Limited) != 1 || found.Limited[0].Spec != "limit x" || !strings.Contains(found.Limited[0].Why, "why") {
		t.Fatalf("limited %+v", found.Limited)
	}
	if len(found.Flaky) != 1 || found.Flaky[0].Spec != "slow once" {
		t.Fatalf("flaky %+v", found.Flaky)
	}
}

func TestDuplicateSuffix(t *testing.T) {
	for name, want := range map[string]string{"A works #2": " #2", "A works": "", "issue #x": "", "#3": ""} {
		if got := duplicateSuffix(name); got != want {
			t.Errorf("%q: %q, want %q", name, got, want)
		}
	}
}
