package robust

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/capo-net/capo/pkg/failpoint"
)

// settle ends the run as a cluster settles once its faults are gone:
// every agent and controller up again without failpoints (but the proof's),
// each node's calico-node pod running, each node's conflist holding
// capo-ipam, every journaled DEL replayed;
// then the last invariant: no pod that holds its address back is still
// reserved it.
func (k *checker) settle(ctx context.Context) {
	c := k.c
	c.proxy.SetRate(0)
	_ = os.Unsetenv(failpoint.EnvVar)
	for _, n := range c.nodes {
		n.mu.Lock()
		armed := n.fp != c.cfg.AgentFailpoints
		n.mu.Unlock()
		if armed {
			n.restartWith(c.cfg.AgentFailpoints)
		}
	}
	for _, r := range c.ctrls {
		r.mu.Lock()
		armed := r.fp != ""
		r.mu.Unlock()
		if armed {
			r.restartWith("")
		}
	}
	if err := c.settleCalicoNodes(ctx); err != nil {
		k.settleViolation(vNotSettled, "calico-node", err.Error())
	}
	if err := c.waitInstalled(); err != nil {
		k.settleViolation(vNotSettled, "conflist", err.Error())
	}
	k.waitDrained(ctx)
	k.round(false)
	k.waitReturnsEnded(ctx)
	k.round(true)
}

// waitDrained waits for every node's journal to empty: once its agent is
// back, no teardown waits in it for long.
func (k *checker) waitDrained(ctx context.Context) {
	for _, n := range k.c.nodes {
		deadline := time.Now().Add(90 * time.Second)
		for {
			p, err := n.env.Journal().Pending()
			if err == nil && len(p) == 0 {
				break
			}
			if time.Now().After(deadline) || ctx.Err() != nil {
				k.settleViolation(vNotSettled, n.env.Node, fmt.Sprintf("%d journaled DELs on %s not replayed 90 s after the faults ended (%v)", len(p), n.env.Node, err))
				break
			}
			time.Sleep(500 * time.Millisecond)
		}
	}
}

// waitReturnsEnded holds the settled cluster to the third invariant: a
// pod that holds an address capo reserved for it has that reservation
// ended, within settleTime (the agent's reconcile).
func (k *checker) waitReturnsEnded(ctx context.Context) {
	deadline := time.Now().Add(settleTime)
	var left []string
	for {
		k.logs.read()
		ix := buildIndex(k.hist.Snapshot())
		s, err := k.c.take(ctx)
		if err == nil {
			left = leftReserved(ix, s)
			if len(left) == 0 {
				return
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			break
		}
		time.Sleep(time.Second)
	}
	for _, l := range left {
		k.settleViolation(vLeftReserved, l, l)
	}
}

// leftReserved are the live sandboxes' addresses still reserved for
// their own pod.
func leftReserved(ix *index, s *sample) []string {
	var out []string
	for _, add := range liveSandboxes(ix) {
		for _, ip := range add.IPs {
			for _, e := range s.Entries {
				if e.IP == ip && e.Namespace+"/"+e.Pod == add.Pod {
					out = append(out, fmt.Sprintf("%s holds %s (sandbox %s on %s) and capo still reserves it for it on %s (reason %s), %s after the run settled",
						add.Pod, ip, short(add.Sandbox), add.Node, e.Node, e.Reason, settleTime))
				}
			}
		}
	}
	return out
}

// settleViolation records what the settled cluster breaks.
func (k *checker) settleViolation(kind, key, what string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.violate(kind, key, time.Now(), strings.TrimSpace(what))
}
