package plugin

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os/exec"
	"strings"
	"time"

	"github.com/capo-net/capo/pkg/journal"
	"github.com/capo-net/capo/pkg/pause"
	"github.com/capo-net/capo/pkg/wire"
)

// Calico's per-pod IPAM choices. The calico plugin applies them only when
// its ipam type is literally "calico-ipam", so under capo-ipam capo applies
// them to the delegate, with Calico's semantics: the namespace's annotation
// is the default and the pod's overrides it.
const (
	AnnotationIPv4Pools  = "cni.projectcalico.org/ipv4pools"
	AnnotationIPv6Pools  = "cni.projectcalico.org/ipv6pools"
	AnnotationIPFamilies = "cni.projectcalico.org/ipFamilies"
)

// Annotations reads a pod's and its namespace's annotations, and, when the
// agent answers, its decision for the pod.
type Annotations interface {
	Get(ctx context.Context, pod wire.PodRef) (*wire.AnnotationsResponse, error)
}

// applyCalicoAnnotations returns the delegate block with the pool and family
// annotations applied, and whether any applied. A malformed annotation fails
// the ADD, as it does under calico-ipam.
func applyCalicoAnnotations(delegate json.RawMessage, nsAnn, podAnn map[string]string, pod string) (json.RawMessage, bool, error) {
	pick := func(key string) (string, string) {
		if v := podAnn[key]; v != "" {
			return v, "pod " + pod
		}
		return nsAnn[key], "the namespace of pod " + pod
	}
	v4, v4From := pick(AnnotationIPv4Pools)
	v6, v6From := pick(AnnotationIPv6Pools)
	fam, famFrom := pick(AnnotationIPFamilies)
	if v4 == "" && v6 == "" && fam == "" {
		return delegate, false, nil
	}
	var ipam map[string]any
	if err := json.Unmarshal(delegate, &ipam); err != nil {
		return nil, false, fmt.Errorf("ipam.delegate: %w", err)
	}
	if err := setPools(ipam, "ipv4_pools", AnnotationIPv4Pools, v4, v4From); err != nil {
		return nil, false, err
	}
	if err := setPools(ipam, "ipv6_pools", AnnotationIPv6Pools, v6, v6From); err != nil {
		return nil, false, err
	}
	if err := setFamilies(ipam, fam, famFrom); err != nil {
		return nil, false, err
	}
	out, err := json.Marshal(ipam)
	return out, true, err
}

// setPools sets key (ipv4_pools, ipv6_pools) of the delegate's ipam block
// to the pools annotation's list; an empty value leaves it as it is.
func setPools(ipam map[string]any, key, annotation, value, from string) error {
	if value == "" {
		return nil
	}
	var l []string
	if err := json.Unmarshal([]byte(value), &l); err != nil {
		return fmt.Errorf("annotation %s=%q on %s is not a JSON list of pool names or CIDRs, like [\"default-ipv4-ippool\"]: %v", annotation, value, from, err)
	}
	ipam[key] = l
	return nil
}

// setFamilies turns the ipFamilies annotation into calico-ipam's
// assign_ipv4 and assign_ipv6; an empty value leaves them as they are.
func setFamilies(ipam map[string]any, fam, from string) error {
	if fam == "" {
		return nil
	}
	var l []string
	if err := json.Unmarshal([]byte(fam), &l); err != nil {
		return fmt.Errorf("annotation %s=%q on %s is not a JSON list like [\"IPv4\",\"IPv6\"]: %v", AnnotationIPFamilies, fam, from, err)
	}
	v4on, v6on := "false", "false"
	for _, f := range l {
		switch f {
		case "IPv4":
			v4on = "true"
		case "IPv6":
			v6on = "true"
		default:
			return fmt.Errorf("annotation %s=%q on %s: %q is not IPv4 or IPv6", AnnotationIPFamilies, fam, from, f)
		}
	}
	ipam["assign_ipv4"], ipam["assign_ipv6"] = v4on, v6on
	return nil
}

// agentAnnotations asks the node's agent, which holds the node's pods and
// every namespace in its caches: a socket round trip instead of a new TLS
// connection and two reads per ADD. If the agent cannot answer, the API
// server is asked directly, so an ADD never depends on the agent.
type agentAnnotations struct {
	agent    annotationsAgent
	network  string // the netconf's name, which the agent checks a predecessor's handle against
	timeout  time.Duration
	fallback Annotations
	// awaited reports whether the host's journal holds a teardown of the
	// pod itself that the agent has not replayed yet; nil: none.
	awaited func(wire.PodRef) bool
	// retry is the pause between asks while the agent is awaited.
	retry time.Duration
}

// annotationsAgent is the agent's side of agentAnnotations (a wire.Client).
type annotationsAgent interface {
	IPAMAnnotationsFor(ctx context.Context, req *wire.AnnotationsRequest) (*wire.AnnotationsResponse, error)
}

// maxAgentWait bounds how long an ADD waits for an agent that is away
// while its pod's own teardown waits in the journal.
const maxAgentWait = 10 * time.Second

// Get asks the agent, with the pod's UID: it tells the agent which object
// to answer for, since a StatefulSet pod re-created under the same name may
// still be the old one in its cache. An agent that does not answer is
// awaited if the pod's own teardown waits in the journal (awaitAgent);
// otherwise, or if it still does not answer, the API server is asked.
func (a agentAnnotations) Get(ctx context.Context, pod wire.PodRef) (*wire.AnnotationsResponse, error) {
	resp, err := a.ask(ctx, pod)
	if err != nil && a.awaited != nil && a.awaited(pod) {
		resp, err = a.awaitAgent(ctx, pod, err)
	}
	if err == nil {
		return resp, nil
	}
	if a.fallback == nil {
		return nil, fmt.Errorf("reading Calico's IPAM annotations: %w (and the netconf names no kubernetes.kubeconfig to read them directly)", err)
	}
	slog.Info("agent could not give the pod's annotations; reading the API server", "err", err)
	return a.fallback.Get(ctx, pod)
}

// awaitAgent asks the agent again until it answers, for a pod whose own
// teardown waits in the journal (its node rebooted, or the agent was away
// as the sandbox went): the one pod the agent may have addresses to give
// back to, and only once it has replayed that teardown. It waits a quarter
// of the ADD's deadline, at most maxAgentWait, and returns the last error
// (first: the one that started the wait) if the agent never answered.
func (a agentAnnotations) awaitAgent(ctx context.Context, pod wire.PodRef, first error) (*wire.AnnotationsResponse, error) {
	wait := min(maxAgentWait, returnShare(ctx))
	slog.Info("waiting for the agent: the pod's own teardown waits in the journal, and the agent may give its addresses back once it has replayed it", "pod", pod.Namespace+"/"+pod.Name, "for", wait, "err", first)
	var resp *wire.AnnotationsResponse
	err := first
	start := time.Now()
	for deadline := start.Add(wait); err != nil && time.Now().Before(deadline); {
		if !pause.Sleep(ctx, min(a.retry, time.Until(deadline))) {
			break
		}
		resp, err = a.ask(ctx, pod)
	}
	if err == nil {
		slog.Info("the agent answered", "pod", pod.Namespace+"/"+pod.Name, "after", time.Since(start).Round(time.Millisecond))
	}
	return resp, err
}

func (a agentAnnotations) ask(ctx context.Context, pod wire.PodRef) (*wire.AnnotationsResponse, error) {
	actx, cancel := context.WithTimeout(ctx, a.timeout)
	defer cancel()
	return a.agent.IPAMAnnotationsFor(actx, &wire.AnnotationsRequest{Pod: pod, Network: a.network})
}

// pendingLister lists journaled DELs (a journal.Dir).
type pendingLister interface {
	Pending() ([]journal.Entry, error)
}

// teardownAwaited reports whether j holds a journaled DEL of pod
// (journal.TeardownsOf) that the agent selected at ADD: a teardown the
// agent reserves from, and may give back, once it replays it.
func teardownAwaited(j pendingLister) func(wire.PodRef) bool {
	return func(pod wire.PodRef) bool {
		entries, err := j.Pending()
		if err != nil {
			return false
		}
		for _, e := range journal.TeardownsOf(entries, pod) {
			if at := e.Record.Request.AtAdd; at != nil && at.Selected {
				return true
			}
		}
		return false
	}
}

// kubeAnnotations reads from the API server with the calico plugin's own
// kubeconfig (the netconf's kubernetes.kubeconfig), as the plugin does, by
// running capo-ipam-kube from CNI_PATH: the HTTPS client lives there, so
// that capo-ipam starts without it on every other call.
type kubeAnnotations struct {
	kubeconfig string
	paths      []string // CNI_PATH, split
}

func (k kubeAnnotations) Get(ctx context.Context, ref wire.PodRef) (*wire.AnnotationsResponse, error) {
	helper := findInPath(k.paths, wire.KubeHelper)
	if helper == "" {
		return nil, fmt.Errorf("%s is missing from CNI_PATH %q: it is installed beside capo-ipam; re-run capo-install (or let capo-agent re-install)", wire.KubeHelper, strings.Join(k.paths, ":"))
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, helper, "--kubeconfig", k.kubeconfig, "--namespace", ref.Namespace, "--pod", ref.Name)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = time.Second
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%s did not answer in time: %w", wire.KubeHelper, ctx.Err())
		}
		return nil, fmt.Errorf("%s: %s (%w)", wire.KubeHelper, strings.TrimSpace(stderr.String()), err)
	}
	var resp wire.AnnotationsResponse
	if err := json.Unmarshal(stdout.Bytes(), &resp); err != nil {
		return nil, fmt.Errorf("%s's answer is not valid: %w", wire.KubeHelper, err)
	}
	return &resp, nil
}
