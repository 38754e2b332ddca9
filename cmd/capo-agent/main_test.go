package main

import (
	"errors"
	"flag"
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
