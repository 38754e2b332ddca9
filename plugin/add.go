package plugin

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"time"

	"github.com/containernetworking/cni/pkg/skel"

	"github.com/capo-net/capo/pkg/journal"
	"github.com/capo-net/capo/pkg/wire"
)

// addDeps are what an ADD needs besides the netconf; cmdAdd builds the real ones.
type addDeps struct {
	delegate Delegate
	journal  Journal
	ann      Annotations // nil: the pod's annotations cannot be read
	reporter Reporter    // hears how a return ended; nil: nobody
	stdout   io.Writer
	steps    *steps // nil: not timed
}

// add returns the delegate's result unchanged: stdout carries it verbatim.
// The addresses are recorded for the DEL, with the agent's decision for the
// pod as of now; if that fails the DEL reads Calico's handle instead, so the
// ADD does not fail for it.
func add(ctx context.Context, args *skel.CmdArgs, conf *NetConf, deps addDeps) error {
	d, j, ann, stdout, st := deps.delegate, deps.journal, deps.ann, deps.stdout, deps.steps
	defer startAhead(ctx, d, "ADD", conf)()
	pod, podErr := podOf(args) // podInfo reports a CNI_ARGS it cannot read, if it matters
	info, err := podInfo(ctx, pod, podErr, conf, ann)
	if err == nil {
		err = applyPodIPAMChoices(conf, info, pod.Namespace+"/"+pod.Name)
	}
	st.done("agent")
	if err != nil {
		slog.Error("ADD failed", "err", err)
		return err
	}
	var ret *wire.Return
	if info != nil {
		ret = info.Return
	}
	rt := returning{
		offer: ret, pod: pod, podName: pod.Namespace + "/" + pod.Name, args: args.Args, rep: deps.reporter,
		sandbox: wire.Sandbox{Network: conf.Name, ContainerID: args.ContainerID, IfName: args.IfName},
		local:   recordedHere(j, conf.Name),
	}
	out, err := returnAdd(ctx, conf, d, rt)
	st.done("delegate")
	if err != nil {
		slog.Error("ADD failed", "err", err)
		return err
	}
	ips := recordAdd(j, args, conf, pod, info, out)
	st.done("record")
	if _, err := stdout.Write(out); err != nil {
		return fmt.Errorf("writing the result: %w", err)
	}
	slog.Info("ADD delegated", "delegate", conf.DelegateType(), "ips", ips)
	st.done("result")
	return nil
}

// recordAdd records the addresses out gives the sandbox, for its DEL, with
// the agent's decision at ADD (info's). A record that cannot be written is
// only logged: the DEL reads Calico's handle instead.
func recordAdd(j Journal, args *skel.CmdArgs, conf *NetConf, pod wire.PodRef, info *wire.AnnotationsResponse, out []byte) []string {
	ips, err := resultIPs(out)
	if err == nil {
		rec := &journal.AddrRecord{Network: conf.Name, ContainerID: args.ContainerID, IfName: args.IfName, Pod: pod, IPs: ips, Created: time.Now().UTC()}
		if info != nil {
			rec.AtAdd = info.Decision
		}
		err = j.RecordAddrs(rec)
	}
	if err != nil {
		slog.Warn("could not record the ADD's addresses; DEL will read Calico's handle", "err", err)
	}
	return ips
}

// podInfo reads what the ADD needs to know of its pod (as podOf read it
// from CNI_ARGS, podErr if it could not): Calico's IPAM annotations and the
// agent's decision. Like the calico plugin, it reads the pod only under
// policy type "k8s". Only when the delegate is calico-ipam do the
// annotations matter, and a failure to read them fails the ADD (as it does
// under calico-ipam); otherwise it is only logged.
func podInfo(ctx context.Context, pod wire.PodRef, podErr error, conf *NetConf, ann Annotations) (*wire.AnnotationsResponse, error) {
	if conf.calico.Policy.Type != "k8s" {
		return nil, nil
	}
	if podErr != nil {
		return nil, podErr
	}
	if pod.Name == "" {
		return nil, nil
	}
	needed := conf.DelegateType() == "calico-ipam"
	if ann == nil {
		if needed {
			slog.Warn("the netconf names no kubernetes.kubeconfig: Calico's pool and family annotations cannot be read")
		}
		return nil, nil
	}
	info, err := ann.Get(ctx, pod)
	if err != nil && !needed {
		slog.Info("the pod's annotations could not be read; not needed for this delegate", "err", err)
		return nil, nil
	}
	return info, err
}

// applyPodIPAMChoices does for the delegate what the calico plugin does for
// calico-ipam and skips for any other ipam type: the pod's (or namespace's)
// pool and family annotations.
func applyPodIPAMChoices(conf *NetConf, info *wire.AnnotationsResponse, pod string) error {
	if info == nil || conf.DelegateType() != "calico-ipam" {
		return nil
	}
	delegate, applied, err := applyCalicoAnnotations(conf.IPAM.Delegate, info.Namespace, info.Pod, pod)
	if err != nil {
		return err
	}
	if applied {
		conf.IPAM.Delegate = delegate
		slog.Info("applied Calico's IPAM annotations to the delegate", "delegate", string(delegate))
	}
	return nil
}

// resultIPs reads the addresses from a delegate result of any CNI version:
// "ips[].address" since 0.3.0, "ip4.ip" and "ip6.ip" before. It decodes
// only those fields, not the whole result through the CNI library's version
// conversions: on every ADD, that took longer than writing the record.
func resultIPs(out []byte) ([]string, error) {
	type ipConfig struct {
		IP string `json:"ip"`
	}
	var r struct {
		IPs []struct {
			Address string `json:"address"`
		} `json:"ips"`
		IP4 *ipConfig `json:"ip4"`
		IP6 *ipConfig `json:"ip6"`
	}
	if err := json.Unmarshal(out, &r); err != nil {
		return nil, fmt.Errorf("the delegate's result: %w", err)
	}
	var cidrs []string
	for _, ip := range r.IPs {
		cidrs = append(cidrs, ip.Address)
	}
	for _, ip := range []*ipConfig{r.IP4, r.IP6} {
		if ip != nil {
			cidrs = append(cidrs, ip.IP)
		}
	}
	ips := make([]string, 0, len(cidrs))
	for _, c := range cidrs {
		p, err := netip.ParsePrefix(c)
		if err != nil {
			return nil, fmt.Errorf("the delegate's result: address %q: %w", c, err)
		}
		ips = append(ips, p.Addr().Unmap().String())
	}
	return ips, nil
}
