package robust

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/capo-net/capo/test/testbed"
)

// The runtime's side: sandboxes set up and torn down through the node's
// CNI config dir as it is on disk at that moment, a failed teardown
// retried until it succeeds, as containerd and the kubelet do.

const (
	cniTimeout = 100 * time.Second // calico-ipam alone gives itself 90 s
	// delPatience is how long the runtime keeps retrying a DEL before the
	// suite calls it stuck: longer than any fault lasts.
	delPatience = 3 * time.Minute
)

// conflist is the node's conflist as the runtime reads it: whole (Calico
// writes it in place, so a read may catch it half-written; the runtime
// runs no plugin on a config it cannot parse).
func (n *node) conflist() ([]byte, error) {
	var b []byte
	var err error
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if b, err = os.ReadFile(n.cni.ConfFile); err == nil && json.Valid(b) {
			return b, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("no whole conflist in %s: %v", n.cni.ConfFile, err)
		}
	}
}

func bypasses(conflist []byte) bool { return !bytes.Contains(conflist, []byte(`"capo-ipam"`)) }

// up sets up a new sandbox for the pod object on node i. A failed ADD's
// sandbox is torn down at once (the runtime's cleanup) and nil returned.
func (c *cluster) up(ctx context.Context, p *podState, obj *corev1.Pod, i int) (*testbed.Sandbox, error) {
	nd := c.nodes[i]
	conf, _ := os.ReadFile(nd.cni.ConfFile) // what NewDiskSandbox is about to read, for the record
	var sb *testbed.Sandbox
	if err := try(func() { sb = nd.env.NewDiskSandbox(obj, nd.cni) }); err != nil {
		return nil, err
	}
	ev := c.hist.Begin(Event{
		Op: opAdd, Pod: c.ns + "/" + p.name, PodUID: string(obj.UID), Node: nd.env.Node, Sandbox: sb.ContainerID,
		Selected: p.set != nil, Owner: string(p.setUID), Bypass: bypasses(conf),
	})
	actx, cancel := context.WithTimeout(ctx, cniTimeout)
	err := sb.Add(actx)
	cancel()
	if err != nil {
		c.hist.End(ev, err)
		_ = c.down(ctx, p, sb, i, nil, "cleanup of a failed ADD")
		return nil, err
	}
	ips := ipsOf(sb)
	c.hist.EndWith(ev, ips, "", nil)
	if err := c.setStatus(ctx, p.name, corev1.PodRunning, "", ips); err != nil {
		c.t.Logf("robust: marking %s running: %v", p.name, err)
	}
	return sb, nil
}

// down tears sb down on node i, retrying as the runtime does until the
// DEL succeeds or delPatience has passed. ips are its addresses (nil when
// not known: a failed ADD's sandbox).
func (c *cluster) down(ctx context.Context, p *podState, sb *testbed.Sandbox, i int, ips []string, why string) error {
	nd := c.nodes[i]
	start := time.Now()
	for attempt, wait := 1, 250*time.Millisecond; ; attempt, wait = attempt+1, min(2*wait, 3*time.Second) {
		conf, err := nd.conflist()
		ev := c.hist.Begin(Event{
			Op: opDel, Pod: c.ns + "/" + p.name, PodUID: string(sb.Pod.UID), Node: nd.env.Node, Sandbox: sb.ContainerID,
			IPs: ips, Detail: why, Selected: p.set != nil, Owner: string(p.setUID), Attempt: attempt, Bypass: err == nil && bypasses(conf),
		})
		if err == nil {
			dctx, cancel := context.WithTimeout(ctx, cniTimeout)
			err = sb.DelWith(dctx, conf)
			cancel()
		}
		gaveUp := err != nil && time.Since(start) > delPatience
		detail := ""
		if gaveUp {
			detail = giveUp
		}
		c.hist.EndWith(ev, nil, detail, err)
		if err == nil {
			sb.RemoveNetNS()
			return nil
		}
		if gaveUp || ctx.Err() != nil {
			return err
		}
		time.Sleep(wait)
	}
}

// giveUp marks the last attempt of a DEL that never succeeded.
const giveUp = "(the runtime gives up: stuck)"

// ipsOf are a sandbox's addresses as strings.
func ipsOf(sb *testbed.Sandbox) []string {
	out := make([]string, 0, len(sb.IPs))
	for _, ip := range sb.IPs {
		out = append(out, ip.String())
	}
	return out
}
