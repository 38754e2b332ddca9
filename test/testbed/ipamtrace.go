package testbed

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/containernetworking/cni/pkg/invoke"
)

// Trace is where one capo-ipam call's time went, from its debug log's
// steps line and the caller's clock: Start is the process start as the
// caller sees it (exec, the Go runtime, package initialisation), Steps the
// steps capo-ipam timed itself, in order, and Exit what followed the last
// step until the caller had the result.
type Trace struct {
	Total, Start, Exit time.Duration
	Steps              []Step
}

// Step is one timed step of a capo-ipam call.
type Step struct {
	Name string
	Took time.Duration
}

// TraceIPAM runs capo-ipam for command as ExecIPAM does, with its log at
// debug level in a file of its own, and reads the steps it logged.
func (e *Env) TraceIPAM(ctx context.Context, command string, netconf []byte, sb *Sandbox) (*Trace, error) {
	logFile := filepath.Join(e.Dir, "capo-ipam-trace.log")
	_ = os.Remove(logFile)
	conf, err := WithIPAMKeys(netconf, map[string]any{"log_level": "debug", "log_file": logFile})
	if err != nil {
		return nil, err
	}
	start := time.Now()
	raw := &invoke.RawExec{Stderr: e.pluginLog()}
	if _, err := raw.ExecPlugin(ctx, filepath.Join(e.BinDir, "capo-ipam"), conf, ipamEnv(command, sb, e.BinDir)); err != nil {
		return nil, fmt.Errorf("capo-ipam %s: %w", command, err)
	}
	end := time.Now()
	line, err := stepsLine(logFile, command+" steps")
	if err != nil {
		return nil, err
	}
	return parseTrace(line, start, end)
}

// WithIPAMKeys sets keys in the netconf's ipam block.
func WithIPAMKeys(netconf []byte, keys map[string]any) ([]byte, error) {
	var conf map[string]any
	if err := json.Unmarshal(netconf, &conf); err != nil {
		return nil, err
	}
	ipam, ok := conf["ipam"].(map[string]any)
	if !ok {
		return nil, fmt.Errorf("netconf has no ipam block")
	}
	for k, v := range keys {
		ipam[k] = v
	}
	return json.Marshal(conf)
}

func stepsLine(logFile, msg string) (map[string]any, error) {
	data, err := os.ReadFile(logFile)
	if err != nil {
		return nil, fmt.Errorf("capo-ipam's trace: %w", err)
	}
	var found map[string]any
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		var m map[string]any
		if json.Unmarshal(sc.Bytes(), &m) == nil && m["msg"] == msg {
			found = m
		}
	}
	if found == nil {
		return nil, fmt.Errorf("capo-ipam logged no %q line in %s", msg, logFile)
	}
	return found, nil
}

// parseTrace reads a steps line: the "<name>Micros" keys in the order
// capo-ipam wrote them, and the two timestamps that bracket them.
func parseTrace(m map[string]any, start, end time.Time) (*Trace, error) {
	began, _ := m["startedUnixNano"].(float64)
	ended, _ := m["endedUnixNano"].(float64)
	if began == 0 || ended == 0 {
		return nil, fmt.Errorf("steps line lacks its timestamps: %v", m)
	}
	t := &Trace{Total: end.Sub(start), Start: time.Unix(0, int64(began)).Sub(start), Exit: end.Sub(time.Unix(0, int64(ended)))}
	for _, name := range stepOrder {
		if v, ok := m[name+"Micros"].(float64); ok {
			t.Steps = append(t.Steps, Step{Name: name, Took: time.Duration(v) * time.Microsecond})
		}
	}
	return t, nil
}

// stepOrder is the order capo-ipam's steps happen in, ADD's and DEL's; a
// step a call did not take is missing from its line.
var stepOrder = strings.Fields("setup agent return delegate record result forget")
