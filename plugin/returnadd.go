package plugin

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/cni/pkg/types/create"

	"github.com/capo-net/capo/pkg/wire"
)

// Requester is a delegate that can be asked for one given address, as the
// calico plugin asks calico-ipam for an ipAddrs address: CNI_ARGS gains
// IP=<address> (calico-ipam reads one address there, ipamArgs in
// cni-plugin/pkg/ipamplugin/ipam_plugin.go, and assigns it with AssignIP,
// which ignores IPReservations).
type Requester interface {
	Request(ctx context.Context, conf *NetConf, cniArgs, ip string) ([]byte, error)
}

var _ Requester = (*ExecDelegate)(nil)

// Request runs the delegate's ADD with IP=ip appended to cniArgs.
func (d *ExecDelegate) Request(ctx context.Context, conf *NetConf, cniArgs, ip string) ([]byte, error) {
	args := "IP=" + ip
	if cniArgs != "" {
		args = cniArgs + ";" + args
	}
	d.Stop() // a call started ahead has the runtime's CNI_ARGS, not these
	e := *d
	e.Env = withEnv(d.Env, "CNI_ARGS", args)
	return e.Invoke(ctx, "ADD", conf)
}

// Reasons capo-ipam reports, returns.Families and returns.Refused by
// value: importing returns would link Kubernetes' and Calico's packages
// into capo-ipam, and every call would pay for their start-up.
const (
	reasonFamilies = "families"
	reasonRefused  = "refused"
)

// Reporter tells the agent how a return ended.
type Reporter interface {
	ReportReturn(ctx context.Context, o *wire.ReturnOutcome) error
}

// returning is a return as capo-ipam's ADD carries it out: the agent's
// offer, the sandbox asking, and who hears how it ended.
type returning struct {
	offer   *wire.Return
	pod     wire.PodRef
	podName string // namespace/name, for logs
	sandbox wire.Sandbox
	args    string // the runtime's CNI_ARGS
	rep     Reporter
	// local reports whether a sandbox of the network has an ADD record on
	// this node; nil: every sandbox may be this node's, and none is freed.
	local func(containerID string) (bool, error)
}

// returnAdd is the ADD of a pod the agent offered addresses to: each
// requested from the delegate, all of them or none, after freeing any
// allocation of them the offer names (reclaim) within the same share of
// the deadline. If the delegate refuses one, what it assigned is released
// and the pod gets an ordinary ADD with fresh addresses; the reservation
// stays, and the agent hears why.
//
// A return that succeeds does not end the reservation either: the agent
// ends it once Calico shows this sandbox up with the addresses, so a
// set-up that fails after IPAM (Calico then releases them) leaves them held.
func returnAdd(ctx context.Context, conf *NetConf, d Delegate, rt returning) ([]byte, error) {
	r, ok := d.(Requester)
	ret := rt.offer
	if ret == nil || len(ret.IPs) == 0 || !ok {
		return d.Invoke(ctx, "ADD", conf)
	}
	outcome := &wire.ReturnOutcome{Pod: rt.pod, Sandbox: rt.sandbox, IPs: ret.IPs}
	if want, got := families(conf.IPAM.Delegate), familiesOf(ret.IPs); want != got {
		outcome.Outcome, outcome.Reason = wire.FellBack, reasonFamilies
		outcome.Why = fmt.Sprintf("capo holds %s for the pod, which is given %s", got, want)
		slog.Info("a returning pod gets fresh addresses: the families held are not the pod's", "pod", rt.podName, "ips", ret.IPs, "why", outcome.Why)
		report(rt.rep, outcome)
		return d.Invoke(ctx, "ADD", conf)
	}
	actx, cancel := context.WithTimeout(ctx, returnShare(ctx))
	if len(ret.Reclaim) > 0 {
		freed, err := reclaim(actx, d, conf, rt)
		outcome.Reclaimed = freed
		if err != nil {
			cancel()
			slog.Warn("a returning pod gets fresh addresses: its predecessor's allocation was not freed", "pod", rt.podName, "ips", ret.IPs, "err", err)
			fellBackReclaiming(outcome, err)
			report(rt.rep, outcome)
			return d.Invoke(ctx, "ADD", conf)
		}
	}
	out, assigned, err := requestAll(actx, r, conf, rt.args, ret.IPs)
	timedOut := actx.Err() != nil
	cancel()
	if err == nil {
		slog.Info("gave a returning pod its addresses back", "pod", rt.podName, "ips", ret.IPs)
		outcome.Outcome = wire.Returned
		report(rt.rep, outcome)
		return out, nil
	}
	slog.Warn("a returning pod gets fresh addresses instead of its own", "pod", rt.podName, "ips", ret.IPs, "err", err)
	if assigned > 0 || timedOut { // one family came back and not the other, or a request was cut off: neither stays
		undo(ctx, d, conf)
	}
	outcome.Outcome, outcome.Reason = wire.FellBack, reasonRefused
	outcome.Why = fmt.Sprintf("calico-ipam would not assign %s: %v", strings.Join(ret.IPs, " and "), err)
	report(rt.rep, outcome)
	return d.Invoke(ctx, "ADD", conf)
}

// maxReturnShare bounds the attempt at a return: a requested address takes
// calico-ipam tens of milliseconds; one stuck behind the host's IPAM lock
// must leave the ordinary ADD the time a plain calico-ipam call would have.
const maxReturnShare = 15 * time.Second

// returnShare is the attempt's part of the ADD's deadline: a quarter, at
// most maxReturnShare.
func returnShare(ctx context.Context) time.Duration {
	share := maxReturnShare
	if dl, ok := ctx.Deadline(); ok {
		share = min(share, time.Until(dl)/4)
	}
	return share
}

// undo releases what a failed return assigned under the sandbox's handle,
// within the same share: the addresses are still reserved, so releasing
// them frees nothing for another pod.
func undo(ctx context.Context, d Delegate, conf *NetConf) {
	uctx, cancel := context.WithTimeout(ctx, returnShare(ctx))
	defer cancel()
	if _, err := d.Invoke(uctx, "DEL", conf); err != nil {
		slog.Warn("releasing what the refused request assigned", "err", err)
	}
}

// families are what calico-ipam assigns under its ipam block: IPv4 unless
// assign_ipv4 is "false", IPv6 if assign_ipv6 is "true" (ipam_plugin.go).
func families(delegate json.RawMessage) string {
	var c struct {
		V4 *string `json:"assign_ipv4"`
		V6 *string `json:"assign_ipv6"`
	}
	_ = json.Unmarshal(delegate, &c)
	return family(c.V4 == nil || *c.V4 != "false", c.V6 != nil && *c.V6 == "true")
}

// familiesOf are the families of the addresses held, worded as families'.
func familiesOf(ips []string) string {
	var v4, v6 bool
	for _, ip := range ips {
		if strings.Contains(ip, ":") {
			v6 = true
		} else {
			v4 = true
		}
	}
	return family(v4, v6)
}

// family words a set of families for the agent's report and the log.
func family(v4, v6 bool) string {
	switch {
	case v4 && v6:
		return "IPv4 and IPv6"
	case v6:
		return "IPv6"
	case v4:
		return "IPv4"
	}
	return "no address"
}

// requestAll asks for each address under one handle and merges the
// results into one of conf's CNI version, as the calico plugin does for
// ipAddrs (ipAddrsResult in cni-plugin/pkg/k8s/k8s.go). assigned counts
// the addresses the delegate assigned, also when a later one failed.
func requestAll(ctx context.Context, r Requester, conf *NetConf, args string, ips []string) (out []byte, assigned int, err error) {
	if len(ips) == 1 {
		out, err = r.Request(ctx, conf, args, ips[0])
		return out, 0, err
	}
	merged := &current.Result{CNIVersion: current.ImplementedSpecVersion}
	for _, ip := range ips {
		out, err := r.Request(ctx, conf, args, ip)
		if err != nil {
			return nil, assigned, err
		}
		assigned++
		res, err := parseResult(conf.CNIVersion, out)
		if err != nil {
			return nil, assigned, err
		}
		merged.IPs = append(merged.IPs, res.IPs...)
		merged.Routes = append(merged.Routes, res.Routes...)
	}
	out, err = encodeResult(merged, conf.CNIVersion)
	return out, assigned, err
}

func parseResult(cniVersion string, out []byte) (*current.Result, error) {
	if cniVersion == "" {
		cniVersion = "0.1.0"
	}
	r, err := create.Create(cniVersion, out)
	if err != nil {
		return nil, fmt.Errorf("reading the delegate's result: %w", err)
	}
	return current.NewResultFromResult(r)
}

func encodeResult(r *current.Result, cniVersion string) ([]byte, error) {
	if cniVersion == "" {
		cniVersion = "0.1.0"
	}
	var res types.Result = r
	res, err := res.GetAsVersion(cniVersion)
	if err != nil {
		return nil, fmt.Errorf("converting the merged result to CNI %s: %w", cniVersion, err)
	}
	return json.Marshal(res)
}

// reportTimeout bounds telling the agent how a return ended.
const reportTimeout = 2 * time.Second

// report tells the agent, briefly: the pod is up either way, and an
// unheard report only leaves a reservation to end as any other does.
func report(rep Reporter, o *wire.ReturnOutcome) {
	if rep == nil {
		return
	}
	// The pod already has its addresses: this wait delays only its start, and
	// a report lost to a busy agent (one just started, paging its code back
	// in) leaves the reservation to its TTL.
	ctx, cancel := context.WithTimeout(context.Background(), reportTimeout)
	defer cancel()
	if err := rep.ReportReturn(ctx, o); err != nil {
		slog.Warn("could not tell the agent how a return ended", "outcome", o.Outcome, "err", err)
	}
}
