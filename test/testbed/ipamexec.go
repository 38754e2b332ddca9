package testbed

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
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
	args := &invoke.Args{
		Command:     command,
		ContainerID: sb.ContainerID,
		NetNS:       sb.NetNS,
		IfName:      sb.IfName,
		PluginArgs:  sb.runtimeConf().Args,
		Path:        e.Bed.CNIBinDir,
	}
	start := time.Now()
	raw := &invoke.RawExec{Stderr: e.pluginLog()}
	_, err := raw.ExecPlugin(ctx, filepath.Join(e.Bed.CNIBinDir, plugin), netconf, args.AsEnv())
	el := time.Since(start)
	if err != nil {
		return el, fmt.Errorf("%s %s: %w", plugin, command, err)
	}
	return el, nil
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
