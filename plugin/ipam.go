// Package plugin is capo-ipam, the IPAM plugin Calico calls in place of
// calico-ipam. It hands every command to the original IPAM plugin (the
// delegate) with the netconf Calico sent, only the ipam block swapped back.
package plugin

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"time"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/cni/pkg/version"

	"github.com/capo-net/capo/pkg/journal"
	"github.com/capo-net/capo/pkg/wire"
)

// SupportedVersions are the CNI versions Calico's conflists use.
var SupportedVersions = version.PluginSupports("0.1.0", "0.2.0", "0.3.0", "0.3.1", "0.4.0", "1.0.0")

// Funcs wires the CNI verbs for skel, each guarded against panics: a panic
// must reach the runtime as a CNI error, never as a crash with empty stdout.
func Funcs() skel.CNIFuncs {
	return skel.CNIFuncs{Add: guard(cmdAdd), Del: guard(cmdDel), Check: guard(cmdCheck)}
}

func guard(f func(*skel.CmdArgs) error) func(*skel.CmdArgs) error {
	return func(args *skel.CmdArgs) (err error) {
		defer func() {
			if r := recover(); r != nil {
				slog.Error("panic", "panic", r, "stack", string(debug.Stack()))
				err = fmt.Errorf("capo-ipam internal error (please report): %v", r)
			}
		}()
		return f(args)
	}
}

// call is one CNI invocation's real dependencies: the netconf, the
// delegate, the journal, a deadline, and the log.
type call struct {
	ctx     context.Context
	conf    *NetConf
	d       *ExecDelegate
	journal journal.Dir
	done    func()
}

// setup parses the netconf and builds the call. The deadline is the
// delegate's, plus the agent's for a DEL, which asks the agent first.
func setup(args *skel.CmdArgs, withAgent bool) (*call, error) {
	conf, err := ParseNetConf(args.StdinData)
	if err != nil {
		return nil, err
	}
	closeLog := configureLogging(conf.IPAM.LogLevel, conf.IPAM.LogFile, args.ContainerID)
	timeout := conf.IPAM.DelegateTimeout.D()
	if withAgent {
		timeout += conf.IPAM.AgentTimeout.D()
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	return &call{
		ctx:     ctx,
		conf:    conf,
		d:       &ExecDelegate{Paths: filepath.SplitList(args.Path), Env: os.Environ(), Stderr: os.Stderr},
		journal: journal.Dir{Root: conf.IPAM.StateDir},
		done:    func() { cancel(); closeLog() },
	}, nil
}

func cmdAdd(args *skel.CmdArgs) error {
	st := newSteps()
	c, err := setup(args, false)
	if err != nil {
		return err
	}
	defer c.done()
	st.done("setup")
	agent := wire.NewClient(c.conf.IPAM.AgentSocket)
	ann := agentAnnotations{agent: agent, network: c.conf.Name, timeout: 2 * time.Second, awaited: teardownAwaited(c.journal), retry: 250 * time.Millisecond}
	if kc := calicoSettingsOf(c.conf).Kubernetes.Kubeconfig; kc != "" {
		ann.fallback = kubeAnnotations{kubeconfig: kc, paths: c.d.Paths}
	}
	err = add(c.ctx, args, c.conf, addDeps{delegate: c.d, journal: c.journal, ann: ann, reporter: agent, stdout: os.Stdout, steps: st})
	st.log("ADD steps")
	return err
}

func cmdDel(args *skel.CmdArgs) error {
	st := newSteps()
	c, err := setup(args, true)
	if err != nil {
		return blocking(err)
	}
	defer c.done()
	deps := delDeps{
		agent:    wire.NewClient(c.conf.IPAM.AgentSocket),
		delegate: c.d,
		journal:  c.journal,
		rollback: parentIsAdding(),
		env:      cniEnv(),
		steps:    st,
		gone:     goneCheck{stateDir: c.conf.IPAM.StateDir, kubeconfig: calicoSettingsOf(c.conf).Kubernetes.Kubeconfig, paths: c.d.Paths, now: time.Now, after: c.conf.IPAM.UninstalledAfter.D()}.gone,
	}
	st.done("setup")
	err = del(c.ctx, args, c.conf, deps)
	st.log("DEL steps")
	return blocking(err)
}

func cmdCheck(args *skel.CmdArgs) error {
	c, err := setup(args, false)
	if err != nil {
		return err
	}
	defer c.done()
	return check(c.ctx, c.conf, c.d)
}

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
	pod, _ := podOf(args) // podInfo reports a CNI_ARGS it cannot read, if it matters
	info, err := podInfo(ctx, args, conf, ann)
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
	st.done("record")
	if _, err := stdout.Write(out); err != nil {
		return fmt.Errorf("writing the result: %w", err)
	}
	slog.Info("ADD delegated", "delegate", conf.DelegateType(), "ips", ips)
	st.done("result")
	return nil
}

// podInfo reads what the ADD needs to know of its pod: Calico's IPAM
// annotations and the agent's decision. Like the calico plugin, it reads
// the pod only under policy type "k8s". Only when the delegate is
// calico-ipam do the annotations matter, and a failure to read them fails
// the ADD (as it does under calico-ipam); otherwise it is only logged.
func podInfo(ctx context.Context, args *skel.CmdArgs, conf *NetConf, ann Annotations) (*wire.AnnotationsResponse, error) {
	if calicoSettingsOf(conf).Policy.Type != "k8s" {
		return nil, nil
	}
	var ka k8sArgs
	if err := types.LoadArgs(args.Args, &ka); err != nil {
		return nil, fmt.Errorf("reading CNI_ARGS %q: %w", args.Args, err)
	}
	ns, name := string(ka.K8S_POD_NAMESPACE), string(ka.K8S_POD_NAME)
	if name == "" {
		return nil, nil
	}
	needed := conf.DelegateType() == "calico-ipam"
	if ann == nil {
		if needed {
			slog.Warn("the netconf names no kubernetes.kubeconfig: Calico's pool and family annotations cannot be read")
		}
		return nil, nil
	}
	info, err := ann.Get(ctx, wire.PodRef{Namespace: ns, Name: name, UID: string(ka.K8S_POD_UID)})
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

func check(ctx context.Context, conf *NetConf, d Delegate) error {
	if _, err := d.Invoke(ctx, "CHECK", conf); err != nil {
		slog.Error("CHECK failed", "err", err)
		return err
	}
	return nil
}

// blocking keeps a DEL error blocking: containerd treats a DEL error that says
// "not found" or "no such file or directory" as success and moves on, which
// for capo would mean an address the runtime thinks is gone.
func blocking(err error) error {
	if err == nil {
		return nil
	}
	r := strings.NewReplacer("not found", "missing", "Not Found", "Missing", "no such file or directory", "ENOENT")
	if e, ok := err.(*types.Error); ok {
		return &types.Error{Code: e.Code, Msg: r.Replace(e.Msg), Details: r.Replace(e.Details)}
	}
	if msg := r.Replace(err.Error()); msg != err.Error() {
		return fmt.Errorf("%s", msg)
	}
	return err
}
