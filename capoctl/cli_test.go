package capoctl

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A command line capoctl cannot run is refused before anything is dialed:
// an unknown -o, a template that does not parse, -n with -A, a pod or an
// address that is not one.
func TestArgumentsCheckedBeforeDialing(t *testing.T) {
	dial := func(*kubeFlags) (*clients, error) {
		t.Fatal("dialed the cluster")
		return nil, nil
	}
	for args, want := range map[string]string{
		"list -o wat":                 "want one of table, wide, json",
		"list -o=jsonpath={.items[":   "-o jsonpath=",
		"list -o jsonpath":            "give the template",
		"returns -o wide":             "want one of table, json",
		"status -o wide":              "want one of table, json",
		"version -o wat":              "want one of",
		"list -n kafka -A":            "give one",
		"list --pod broker-2":         "want NAMESPACE/NAME",
		"list extra":                  "unknown command",
		"release 10.9.9.300 --yes":    "not an IP",
		"release --all --node w1":     "give it alone",
		"release":                     "say what to release",
		"explain broker-2":            "want NAMESPACE/NAME",
		"list --no-such-flag":         "unknown flag",
		"status --wait-timeout=never": "invalid argument",
	} {
		var out, errw strings.Builder
		code := run(strings.Fields(args), strings.NewReader(""), &out, &errw, dial, now, "capoctl")
		if code == 0 || !strings.Contains(errw.String(), want) || out.Len() != 0 && !strings.Contains(args, "extra") {
			t.Errorf("capoctl %s: exit %d, want an error with %q:\n%s%s", args, code, want, out.String(), errw.String())
		}
	}
}

// kubectl's output flags: -ojson, --output=yaml, jsonpath over .items,
// go-template, and a wide table with more columns.
func TestOutputFormats(t *testing.T) {
	c := newCtl(t)
	c.reserve("worker-3", entry("10.42.7.19", "broker-2", 12*time.Minute))
	c.reserve("worker-5", entry("fd00::9", "broker-5", time.Hour))
	code, out, errw := c.run("", "list", "-ojson")
	var rows []map[string]any
	if err := json.Unmarshal([]byte(out), &rows); err != nil || code != 0 || len(rows) != 2 {
		t.Fatalf("-ojson: exit %d, %v: %s%s", code, err, out, errw)
	}
	if code, out, _ = c.run("", "list", "--output=yaml"); code != 0 || !strings.HasPrefix(out, "- expiresAt:") {
		t.Fatalf("--output=yaml: exit %d:\n%s", code, out)
	}
	if code, out, _ = c.run("", "list", "-o", "jsonpath={.items[*].ip}"); code != 0 || out != "10.42.7.19 fd00::9" {
		t.Fatalf("jsonpath: exit %d: %q", code, out)
	}
	if code, out, _ = c.run("", "list", "-o", "go-template={{range .items}}{{.node}} {{end}}"); code != 0 || out != "worker-3 worker-5 " {
		t.Fatalf("go-template: exit %d: %q", code, out)
	}
	if code, out, _ = c.run("", "list", "-o", "wide"); code != 0 || !strings.Contains(out, "OWNER") || !strings.Contains(out, "StatefulSet/broker") {
		t.Fatalf("-o wide: exit %d:\n%s", code, out)
	}
	if code, out, _ = c.run("", "list", "-A", "-o", "json"); code != 0 || strings.Count(out, `"ip"`) != 2 {
		t.Fatalf("-A: exit %d:\n%s", code, out)
	}
}

// Go flag spellings that scripts used keep working: -all, -node N, -yes.
func TestOldFlagSpellings(t *testing.T) {
	c := newCtl(t)
	c.reserve("worker-3", entry("10.42.7.19", "broker-2", 12*time.Minute))
	c.reserve("worker-5", entry("fd00::9", "broker-5", time.Hour))
	if code, out, errw := c.run("", "list", "-node", "worker-5", "-o", "json"); code != 0 || strings.Contains(out, "10.42.7.19") || !strings.Contains(out, "fd00::9") {
		t.Fatalf("-node: exit %d:\n%s%s", code, out, errw)
	}
	if code, out, errw := c.run("", "release", "-all", "-yes"); code != 0 || !strings.Contains(out, "released 2") {
		t.Fatalf("-all -yes: exit %d:\n%s%s", code, out, errw)
	}
}

// The case: an endpoint that answers 404 to everything is not a
// cluster holding nothing. list -o json exits 1, names the type, and
// prints no [] a script would read as "nothing held".
func TestMissingTypeIsAnError(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	defer srv.Close()
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	cfg := "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: " + srv.URL + "}}]\nusers: [{name: u, user: {token: t}}]\ncontexts: [{name: c, context: {cluster: c, user: u}}]\ncurrent-context: c\n"
	if err := os.WriteFile(kc, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("DATASTORE_TYPE", "")
	for _, args := range [][]string{{"list", "-o", "json"}, {"returns", "-o", "json"}, {"status"}} {
		var out, errw strings.Builder
		code := run(append(args, "--kubeconfig", kc), strings.NewReader(""), &out, &errw, connect, now, "capoctl")
		if code == 0 || out.Len() != 0 || !strings.Contains(errw.String(), "does not serve Calico's IPReservation type") {
			t.Errorf("%v against a 404 endpoint: exit %d\nstdout: %q\nstderr: %s", args, code, out.String(), errw.String())
		}
	}
}

// Completion asks the cluster: pods for explain (namespace first), held
// addresses for release, nodes for --node.
func TestDynamicCompletion(t *testing.T) {
	c := newCtl(t,
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kafka"}},
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "kafka", Name: "broker-2"}},
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "worker-3"}},
	)
	c.reserve("worker-3", entry("10.42.7.19", "broker-2", 12*time.Minute))
	for args, want := range map[string]string{
		"__complete explain ka":        "kafka/\n:6",
		"__complete explain kafka/b":   "kafka/broker-2\n:4",
		"__complete release 10.":       "10.42.7.19\n:4",
		"__complete list --node w":     "worker-3\n:4",
		"__complete list -o j":         "json\njsonpath=\njsonpath-file=\njsonpath-as-json=\n:6",
		"__complete explain kafka/x y": ":4",
	} {
		code, out, errw := c.run("", strings.Fields(args)...)
		if code != 0 || !strings.HasPrefix(out, strings.TrimPrefix(want, "\n")) && !strings.Contains(out, want) {
			t.Errorf("%s: exit %d, want %q:\n%s%s", args, code, want, out, errw)
		}
	}
}

// --request-timeout reaches the Kubernetes client, as kubectl's does.
func TestRequestTimeout(t *testing.T) {
	a, b := writeKubeconfigs(t)
	t.Setenv("KUBECONFIG", a+string(os.PathListSeparator)+b)
	r, err := resolve(parseFlags(t, "--request-timeout=7s"))
	if err != nil || r.rest.Timeout != 7*time.Second {
		t.Fatalf("%v, timeout %v", err, r.rest.Timeout)
	}
}
