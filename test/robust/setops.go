package robust

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/capo-net/capo/pkg/reserve"
)

// scale sets the set's replicas; the members past the new count go, as
// the StatefulSet controller deletes them (the kubelet then tears their
// sandboxes down).
func (c *cluster) scale(ctx context.Context, m *traffic, s *setState, n int, apiFirst bool) error {
	ev := c.hist.Begin(Event{Op: opScale, Owner: string(s.uid), Value: s.name, N: n, Detail: fmt.Sprintf("replicas %d->%d", s.replicas, n)})
	err := c.scaleSet(ctx, s.name, n)
	c.hist.End(ev, err)
	if err != nil {
		return err
	}
	m.update(func() { s.replicas = n })
	return c.removeMembers(ctx, m, s, n, apiFirst)
}

// removeMembers removes the set's members from ordinal from on.
func (c *cluster) removeMembers(ctx context.Context, m *traffic, s *setState, from int, apiFirst bool) error {
	var first error
	for _, p := range m.pods {
		if p.set == s && p.ordinal >= from && p.hasObject() {
			if err := c.remove(ctx, m, p, apiFirst); err != nil && first == nil {
				first = err
			}
		}
	}
	return first
}

// dropSet deletes the set and, as the garbage collector does, its members.
func (c *cluster) dropSet(ctx context.Context, m *traffic, s *setState, apiFirst bool) error {
	ev := c.hist.Begin(Event{Op: opDeleteSet, Owner: string(s.uid), Value: s.name})
	err := c.deleteSet(ctx, s.name)
	c.hist.End(ev, err)
	if err != nil {
		return err
	}
	m.update(func() { s.exists, s.replicas = false, 0 })
	return c.removeMembers(ctx, m, s, 0, apiFirst)
}

// newSet makes the set anew: a new object, a new UID, n replicas.
func (c *cluster) newSet(ctx context.Context, m *traffic, s *setState, n int) error {
	ev := c.hist.Begin(Event{Op: opCreateSet, Value: s.name, N: n, Detail: fmt.Sprintf("replicas=%d", n)})
	uid, err := c.createSet(ctx, s, n)
	c.hist.Set(ev, func(e *Event) { e.Owner = string(uid) })
	c.hist.End(ev, err)
	if err != nil {
		return err
	}
	m.update(func() { s.exists, s.uid, s.replicas, s.ttl = true, uid, n, "" })
	return nil
}

// ttl sets the set's own reservation time ("" removes it).
func (c *cluster) ttl(ctx context.Context, m *traffic, s *setState, ttl string) error {
	ev := c.hist.Begin(Event{Op: opSetTTL, Owner: string(s.uid), Value: s.name, Detail: "ttl=" + orNone(ttl)})
	err := c.setTTL(ctx, s.name, ttl)
	c.hist.End(ev, err)
	if err == nil {
		m.update(func() { s.ttl = ttl })
	}
	return err
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

var releasedN = regexp.MustCompile(`released (\d+)`)

// capoctl releases one held address by hand, as an operator runs
// capoctl release; its credentials go through the proxy.
func (c *cluster) capoctl(pick int) error {
	e, ok := c.pickHeld(pick)
	if !ok {
		return nil
	}
	ev := c.hist.Begin(Event{Op: opCapoctl, Pod: e.Namespace + "/" + e.Pod, Node: e.Node, Sandbox: e.Sandbox, IPs: []string{e.IP}, Value: e.Reason})
	out, code := c.nodes[0].env.Capoctl([]string{"KUBECONFIG=" + c.proxy.Kubeconfig}, "release", e.IP, "--yes")
	var err error
	if code != 0 {
		err = fmt.Errorf("capoctl release exited %d: %s", code, strings.TrimSpace(out))
	}
	c.hist.EndWith(ev, nil, releasedN.FindString(out), err)
	return err
}

// ask asks capo-controller to release one held address, or all of its
// pod's, through the release ConfigMap.
func (c *cluster) ask(ctx context.Context, pick int) error {
	e, ok := c.pickHeld(pick)
	if !ok {
		return nil
	}
	ev := Event{Op: opAskRelease, Node: e.Node, Pod: e.Namespace + "/" + e.Pod}
	value := "pod=" + e.Namespace + "/" + e.Pod
	if pick%2 == 1 {
		value, ev.IPs = e.IP, []string{e.IP}
	}
	ev.Value = value
	rec := c.hist.Begin(ev)
	err := c.askRelease(ctx, e.Node, value)
	c.hist.End(rec, err)
	return err
}

// pickHeld is a reservation the last sample saw, chosen by pick.
func (c *cluster) pickHeld(pick int) (reserve.Entry, bool) {
	s := c.latest.Load()
	if s == nil || len(s.Entries) == 0 {
		return reserve.Entry{}, false
	}
	held := s.Entries
	return held[pick%len(held)], true
}

// settleTime is how long the settled cluster has for its last reservations
// of returned addresses to end (the agent reconciles every 30 s).
const settleTime = 45 * time.Second
