package main

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestParseFlags(t *testing.T) {
	t.Setenv("NODENAME", "node-a")
	t.Setenv("POD_NAMESPACE", "capo-system")
	o, _, qps, err := parseFlags([]string{"--drain-interval=3s"})
	if err != nil || o.NodeName != "node-a" || o.ConfigNamespace != "capo-system" || o.DrainInterval != 3*time.Second || qps != 20 {
		t.Fatalf("%+v qps %v err %v", o, qps, err)
	}
	if _, _, _, err := parseFlags([]string{"--help"}); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("--help: %v", err)
	}
	t.Setenv("NODENAME", "")
	for args, want := range map[string]string{
		"":                                   "--node-name or NODENAME is required",
		"--node-name=a --drain-interval=1ms": "below 1s",
		"--node-name=a --log-level=loud":     "--log-level",
		"--node-name=a --datastore-qps=0":    "must be positive",
	} {
		_, _, _, err := parseFlags(strings.Fields(args))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: err %v, want %q", args, err, want)
		}
	}
}

// node-info takes the agent's own flags (capoctl passes the container's)
// and prints the node view of the directories they name.
func TestNodeInfoCommand(t *testing.T) {
	t.Setenv("NODENAME", "node-a")
	conf, state := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(conf, "10-calico.conflist"), []byte(`{"name":"k8s-pod-network","plugins":[{"type":"calico","k8s_auth_token":"planted"}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errw strings.Builder
	code := nodeInfo([]string{"--manage-cni", "--cni-bin-dir=/opt/cni/bin", "--cni-conf-dir=" + conf, "--state-dir=" + state}, &out, &errw)
	if code != 0 || !strings.Contains(out.String(), `"node": "node-a"`) || !strings.Contains(out.String(), "k8s-pod-network") || strings.Contains(out.String(), "planted") {
		t.Fatalf("exit %d\n%s\n%s", code, out.String(), errw.String())
	}
	if code := nodeInfo([]string{"--drain-interval=1ms"}, &out, &errw); code != 2 || !strings.Contains(errw.String(), "below 1s") {
		t.Fatalf("bad flags: exit %d, %s", code, errw.String())
	}
}
