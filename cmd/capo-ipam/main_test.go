package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// These run the built binary the way a runtime does: env vars and stdin.
var bin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "capo-ipam-test")
	if err != nil {
		panic(err)
	}
	bin = filepath.Join(dir, "capo-ipam")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		panic(string(out))
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

func run(t *testing.T, stdin string, env ...string) (stdout, stderr string, exit int) {
	t.Helper()
	cmd := exec.Command(bin)
	cmd.Env = append([]string{"PATH=/usr/bin:/bin"}, env...)
	cmd.Stdin = strings.NewReader(stdin)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		exit = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return o.String(), e.String(), exit
}

type cniError struct {
	Code int    `json:"code"`
	Msg  string `json:"msg"`
}

func decodeErr(t *testing.T, stdout string) cniError {
	t.Helper()
	var e cniError
	if err := json.Unmarshal([]byte(stdout), &e); err != nil {
		t.Fatalf("stdout is not a CNI error object: %q", stdout)
	}
	return e
}

func TestVersionAnswersCalicoVersions(t *testing.T) {
	out, _, code := run(t, `{"cniVersion":"0.3.1"}`, "CNI_COMMAND=VERSION")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, out)
	}
	var v struct {
		Supported []string `json:"supportedVersions"`
	}
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(v.Supported, ","); got != "0.1.0,0.2.0,0.3.0,0.3.1,0.4.0,1.0.0" {
		t.Fatalf("supportedVersions = %s", got)
	}
}

func TestGarbageStdinIsACNIError(t *testing.T) {
	env := []string{"CNI_COMMAND=ADD", "CNI_CONTAINERID=c1", "CNI_NETNS=/var/run/netns/none", "CNI_IFNAME=eth0", "CNI_PATH=/nonexistent"}
	out, _, code := run(t, "this is not json", env...)
	e := decodeErr(t, out)
	if code != 1 || e.Code != 6 || !strings.Contains(e.Msg, "cannot read the netconf on stdin") {
		t.Fatalf("exit %d, error %+v", code, e)
	}
}

func TestNoIPAMIsACNIErrorOnDel(t *testing.T) {
	env := []string{"CNI_COMMAND=DEL", "CNI_CONTAINERID=c1", "CNI_IFNAME=eth0", "CNI_PATH=/nonexistent"}
	out, _, code := run(t, `{"cniVersion":"0.3.1","name":"n","type":"calico"}`, env...)
	e := decodeErr(t, out)
	if code != 1 || !strings.Contains(e.Msg, `no "ipam" block`) {
		t.Fatalf("exit %d, error %+v", code, e)
	}
}

func TestDelWithAgentDownIsJournaledNotReleased(t *testing.T) {
	dir := t.TempDir()
	marker := filepath.Join(dir, "delegate-ran")
	bin := filepath.Join(dir, "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	// A delegate that, like any CNI plugin, reads its netconf first and then
	// acts, leaving a mark: it must not act while the agent is down (it may
	// have been started ahead, to wait for a netconf that never comes).
	if err := os.WriteFile(filepath.Join(bin, "calico-ipam"), []byte("#!/bin/sh\nstdin=$(cat)\n[ -n \"$stdin\" ] && echo \"$stdin\" > "+marker+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	conf := `{"cniVersion":"0.3.1","name":"n","ipam":{"type":"capo-ipam","agent_socket":"` + filepath.Join(dir, "no-agent.sock") + `","state_dir":"` + dir + `"}}`
	env := []string{"CNI_COMMAND=DEL", "CNI_CONTAINERID=c1", "CNI_IFNAME=eth0", "CNI_PATH=" + bin, "CNI_ARGS=K8S_POD_NAMESPACE=a;K8S_POD_NAME=b"}
	out, stderr, code := run(t, conf, env...)
	if code != 0 || out != "" {
		t.Fatalf("exit %d stdout %q stderr %s", code, out, stderr)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the delegate released the address while the agent was down")
	}
	records, _ := filepath.Glob(filepath.Join(dir, "pending", "*.json"))
	if len(records) != 1 || !strings.Contains(stderr, "DEL journaled") {
		t.Fatalf("records %v, stderr %s", records, stderr)
	}
}

func TestNoCommandPrintsAbout(t *testing.T) {
	out, stderr, code := run(t, "")
	if code != 0 || out != "" || !strings.Contains(stderr, "capo-ipam") || !strings.Contains(stderr, "1.0.0") {
		t.Fatalf("exit %d stdout %q stderr %q", code, out, stderr)
	}
}

// capo-ipam runs for every pod start and stop: it must not link an HTTPS
// client (net/http, crypto/tls) or a YAML parser, whose package
// initialisation and pages every run would pay. capo-ipam-kube has them.
func TestLinksNoHTTPSClient(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, pkg := range strings.Fields(string(out)) {
		if pkg == "net/http" || pkg == "crypto/tls" || strings.Contains(pkg, "yaml") || strings.HasPrefix(pkg, "k8s.io/") {
			t.Errorf("capo-ipam links %s", pkg)
		}
	}
}
