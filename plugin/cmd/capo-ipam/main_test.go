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

func TestMissingDelegateOnDelBlocksWithoutSwallowedWords(t *testing.T) {
	env := []string{"CNI_COMMAND=DEL", "CNI_CONTAINERID=c1", "CNI_IFNAME=eth0", "CNI_PATH=" + t.TempDir()}
	out, stderr, code := run(t, `{"cniVersion":"0.3.1","name":"n","ipam":{"type":"capo-ipam"}}`, env...)
	e := decodeErr(t, out)
	if code != 1 || !strings.Contains(e.Msg, `"calico-ipam" is missing from CNI_PATH`) || strings.Contains(e.Msg, "not found") {
		t.Fatalf("exit %d, error %+v", code, e)
	}
	if !strings.Contains(stderr, `"level":"ERROR"`) {
		t.Fatalf("expected a structured log line on stderr, got %q", stderr)
	}
}

func TestNoCommandPrintsAbout(t *testing.T) {
	out, stderr, code := run(t, "")
	if code != 0 || out != "" || !strings.Contains(stderr, "capo-ipam") || !strings.Contains(stderr, "1.0.0") {
		t.Fatalf("exit %d stdout %q stderr %q", code, out, stderr)
	}
}
