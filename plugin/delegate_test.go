package plugin

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"

	"github.com/capo-net/capo/pkg/wire"
)

// script writes an executable delegate named name into a fresh CNI_PATH dir.
func script(t *testing.T, name, body string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"+body), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

func mustConf(t *testing.T, s string) *NetConf {
	t.Helper()
	c, err := ParseNetConf([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

const testConf = `{"cniVersion":"0.3.1","name":"net1","ipam":{"type":"capo-ipam","delegate":{"type":"fake-ipam","k":1}}}`

func TestDelegateGetsNetconfEnvAndReturnsStdoutVerbatim(t *testing.T) {
	out := filepath.Join(t.TempDir(), "seen")
	dir := script(t, "fake-ipam", `cat > `+out+`.stdin; env > `+out+`.env; printf '{"cniVersion":"0.3.1","ips":[{"version":"4","address":"10.1.2.3/32"}]}'`)
	d := &ExecDelegate{Paths: []string{"/nonexistent", dir}, Env: []string{"CNI_COMMAND=VERSION", "CNI_CONTAINERID=abc", "CNI_ARGS=K8S_POD_NAME=p"}}
	var stdout bytes.Buffer
	j := &fakeJournal{}
	args := &skel.CmdArgs{ContainerID: "abc", IfName: "eth0", Args: "IgnoreUnknown=1;K8S_POD_NAMESPACE=kafka;K8S_POD_NAME=b-0;K8S_POD_UID=u-0"}
	if err := add(context.Background(), args, mustConf(t, testConf), addDeps{delegate: d, journal: j, stdout: &stdout}); err != nil {
		t.Fatal(err)
	}
	if got := stdout.String(); got != `{"cniVersion":"0.3.1","ips":[{"version":"4","address":"10.1.2.3/32"}]}` {
		t.Fatalf("stdout = %s", got)
	}
	stdin, _ := os.ReadFile(out + ".stdin")
	if string(stdin) != `{"cniVersion":"0.3.1","name":"net1","ipam":{"type":"fake-ipam","k":1}}` {
		t.Fatalf("delegate stdin = %s", stdin)
	}
	if got := j.addrs["net1/abc/eth0"]; len(got) != 1 || got[0] != "10.1.2.3" {
		t.Fatalf("ADD recorded %v", j.addrs)
	}
	if r := j.recorded[0]; r.Pod != (wire.PodRef{Namespace: "kafka", Name: "b-0", UID: "u-0"}) || r.Created.IsZero() {
		t.Fatalf("ADD record lacks the pod: %+v", r)
	}
	env, _ := os.ReadFile(out + ".env")
	for _, want := range []string{"CNI_COMMAND=ADD\n", "CNI_CONTAINERID=abc\n", "CNI_ARGS=K8S_POD_NAME=p\n"} {
		if !strings.Contains(string(env), want) {
			t.Errorf("delegate env lacks %q:\n%s", want, env)
		}
	}
	if strings.Count(string(env), "CNI_COMMAND=") != 1 {
		t.Errorf("CNI_COMMAND set more than once:\n%s", env)
	}
}

func TestDelegateCNIErrorKeepsCode(t *testing.T) {
	dir := script(t, "fake-ipam", `printf '{"cniVersion":"0.3.1","code":11,"msg":"datastore busy","details":"d"}'; exit 1`)
	d := &ExecDelegate{Paths: []string{dir}}
	_, err := d.Invoke(context.Background(), "DEL", mustConf(t, testConf))
	var e *types.Error
	if !errors.As(err, &e) || e.Code != 11 || e.Msg != "delegate fake-ipam DEL: datastore busy" || e.Details != "d" {
		t.Fatalf("err = %#v", err)
	}
}

func TestDelegateFailureWithoutCNIError(t *testing.T) {
	dir := script(t, "fake-ipam", `echo "boom on stderr" >&2; exit 3`)
	d := &ExecDelegate{Paths: []string{dir}}
	err := check(context.Background(), mustConf(t, testConf), d)
	if err == nil || !strings.Contains(err.Error(), "delegate fake-ipam CHECK") || !strings.Contains(err.Error(), "boom on stderr") || !strings.Contains(err.Error(), "exit status 3") {
		t.Fatalf("err = %v", err)
	}
}

func TestDelegateMissing(t *testing.T) {
	d := &ExecDelegate{Paths: []string{t.TempDir()}}
	_, err := d.Invoke(context.Background(), "DEL", mustConf(t, testConf))
	err = blocking(err)
	if err == nil || !strings.Contains(err.Error(), `delegate plugin "fake-ipam" is missing from CNI_PATH`) {
		t.Fatalf("err = %v", err)
	}
	// containerd treats these words in a DEL error as success.
	for _, bad := range []string{"not found", "no such file or directory"} {
		if strings.Contains(err.Error(), bad) {
			t.Fatalf("DEL error %q contains %q", err, bad)
		}
	}
}

func TestDelegateHangHitsDeadline(t *testing.T) {
	dir := script(t, "fake-ipam", `exec sleep 30`)
	conf := mustConf(t, `{"name":"n","ipam":{"type":"capo-ipam","delegate_timeout":"300ms","delegate":{"type":"fake-ipam"}}}`)
	d := &ExecDelegate{Paths: []string{dir}}
	ctx, cancel := context.WithTimeout(context.Background(), conf.IPAM.DelegateTimeout.D())
	defer cancel()
	start := time.Now()
	err := add(ctx, &skel.CmdArgs{}, conf, addDeps{delegate: d, journal: &fakeJournal{}, stdout: &bytes.Buffer{}})
	if err == nil || !strings.Contains(err.Error(), "did not answer within 300ms") {
		t.Fatalf("err = %v", err)
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Fatalf("returned after %v, want soon after the 300ms deadline", el)
	}
}

func TestBlockingRewritesWordsContainerdSwallows(t *testing.T) {
	err := blocking(&types.Error{Code: 7, Msg: "pool not found", Details: "open x: no such file or directory"})
	var e *types.Error
	if !errors.As(err, &e) || e.Code != 7 || e.Msg != "pool missing" || e.Details != "open x: ENOENT" {
		t.Fatalf("got %#v", err)
	}
	if got := blocking(errors.New("handle Not Found")).Error(); got != "handle Missing" {
		t.Fatalf("got %q", got)
	}
	if blocking(nil) != nil {
		t.Fatal("nil must stay nil")
	}
}

func TestGuardTurnsPanicIntoError(t *testing.T) {
	f := guard(func(*skel.CmdArgs) error { panic("kaboom") })
	err := f(nil)
	if err == nil || !strings.Contains(err.Error(), "internal error") || !strings.Contains(err.Error(), "kaboom") {
		t.Fatalf("err = %v", err)
	}
}
