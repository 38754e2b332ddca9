package testbed

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	"github.com/containernetworking/cni/pkg/invoke"
)

// IPAMNetConf is the stdin the calico plugin hands its IPAM plugin: the
// calico plugin's own config, with the list's name and cniVersion.
func (e *Env) IPAMNetConf(mode IPAM) []byte {
	var list struct {
		Name       string           `json:"name"`
		CNIVersion string           `json:"cniVersion"`
		Plugins    []map[string]any `json:"plugins"`
	}
	if err := json.Unmarshal(e.Conflist(mode), &list); err != nil {
		panic(err)
	}
	conf := list.Plugins[0]
	conf["name"], conf["cniVersion"] = list.Name, list.CNIVersion
	b, _ := json.Marshal(conf)
	return b
}

// ExecIPAM runs an IPAM plugin binary directly, as the calico plugin does,
// for sandbox sb. It returns how long the plugin took.
func (e *Env) ExecIPAM(ctx context.Context, plugin, command string, netconf []byte, sb *Sandbox) (time.Duration, error) {
	start := time.Now()
	raw := &invoke.RawExec{Stderr: e.pluginLog()}
	_, err := raw.ExecPlugin(ctx, filepath.Join(e.BinDir, plugin), netconf, ipamEnv(command, sb, e.BinDir))
	el := time.Since(start)
	if err != nil {
		return el, fmt.Errorf("%s %s: %w", plugin, command, err)
	}
	return el, nil
}

// ipamEnv is the environment the calico plugin gives its IPAM plugin.
func ipamEnv(command string, sb *Sandbox, cniPath string) []string {
	args := &invoke.Args{
		Command:     command,
		ContainerID: sb.ContainerID,
		NetNS:       sb.NetNS,
		IfName:      sb.IfName,
		PluginArgs:  sb.runtimeConf().Args,
		Path:        cniPath,
	}
	return args.AsEnv()
}

// Percentiles returns the median and 99th percentile of ds.
func Percentiles(ds []time.Duration) (p50, p99 time.Duration) {
	if len(ds) == 0 {
		return 0, 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2], s[min(len(s)-1, (len(s)*99+99)/100-1)]
}

// Ms is d in milliseconds, for benchmark metrics.
func Ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// Peaks are the resident-memory high-water marks of one IPAM call, in bytes.
type Peaks struct {
	// Process is the plugin process's peak as wait4 reports it: for a
	// plugin that runs another, the larger of the two.
	Process int64
	// Shim is capo-ipam's own peak, read from /proc/<pid>/status as it
	// hands the call to calico-ipam; zero for a plugin that delegates
	// nothing. capo-ipam stays resident while calico-ipam runs, so a capo
	// call's footprint is Shim plus calico-ipam's own peak.
	Shim int64
}

// ExecIPAMPeaks runs an IPAM plugin as ExecIPAM does and measures its memory.
// The delegate is found through a probe directory whose calico-ipam records
// its parent's VmHWM and then execs the real calico-ipam, so the call itself
// is unchanged.
func (e *Env) ExecIPAMPeaks(ctx context.Context, plugin, command string, netconf []byte, sb *Sandbox) (Peaks, error) {
	probe := filepath.Join(e.Dir, "probe-bin")
	hwm := filepath.Join(e.Dir, "probe-hwm")
	if _, err := os.Stat(probe); err != nil {
		script := fmt.Sprintf("#!/bin/sh\ngrep '^VmHWM:' /proc/$PPID/status > %s\nexec %s \"$@\"\n", hwm, filepath.Join(e.BinDir, "calico-ipam"))
		if err := os.MkdirAll(probe, 0o755); err != nil {
			return Peaks{}, err
		}
		if err := os.WriteFile(filepath.Join(probe, "calico-ipam"), []byte(script), 0o755); err != nil {
			return Peaks{}, err
		}
	}
	_ = os.Remove(hwm)
	cmd := exec.CommandContext(ctx, filepath.Join(e.BinDir, plugin))
	cmd.Env = ipamEnv(command, sb, probe)
	cmd.Stdin = bytes.NewReader(netconf)
	cmd.Stderr = e.pluginLog()
	if out, err := cmd.Output(); err != nil {
		return Peaks{}, fmt.Errorf("%s %s: %w: %s", plugin, command, err, out)
	}
	var p Peaks
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		p.Process = ru.Maxrss << 10 // KiB on Linux
	}
	if b, err := os.ReadFile(hwm); err == nil {
		p.Shim = statusKiB(string(b), "VmHWM:") << 10
	}
	return p, nil
}
