package robust

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	"github.com/capo-net/capo/pkg/config"
)

// do carries out o on the cluster and brings the model up to date.
func (c *cluster) do(ctx context.Context, m *traffic, o *op) error {
	defer m.done(o)
	switch o.kind {
	case kStart:
		return c.start(ctx, m, o.pod, o.node)
	case kReplace: // the StatefulSet controller replaces a Failed member
		if err := c.remove(ctx, m, o.pod, true); err != nil {
			return err
		}
		return c.start(ctx, m, o.pod, o.node)
	case kPodGC, kDelete:
		return c.remove(ctx, m, o.pod, o.first)
	case kEvict:
		return c.evict(ctx, m, o.pod)
	case kRecreate:
		return c.recreate(ctx, m, o.pod)
	case kScale:
		return c.scale(ctx, m, o.set, o.n, o.first)
	case kDelSet:
		return c.dropSet(ctx, m, o.set, o.first)
	case kNewSet:
		return c.newSet(ctx, m, o.set, o.n)
	case kTTL:
		return c.ttl(ctx, m, o.set, o.ttl)
	case kCapoctl:
		return c.capoctl(o.pick)
	case kAsk:
		return c.ask(ctx, o.pick)
	case kMode:
		return c.mode(m, o.mode)
	}
	return fmt.Errorf("no operation %q", o.kind)
}

// start makes the pod's object (bound to node i) if it has none, and
// sets up its sandbox on its node.
func (c *cluster) start(ctx context.Context, m *traffic, p *podState, i int) error {
	m.mu.Lock()
	obj, setUID := p.obj, ""
	if obj != nil {
		i = p.node
	}
	want := c.podObject(p, i)
	if p.set != nil {
		setUID = string(p.set.uid)
	}
	m.mu.Unlock()
	if obj == nil {
		ev := c.hist.Begin(Event{Op: opCreatePod, Pod: c.ns + "/" + p.name, Node: c.nodes[i].env.Node, Owner: setUID, Selected: p.set != nil})
		var err error
		obj, err = c.createPod(ctx, want)
		if obj != nil {
			c.hist.Set(ev, func(e *Event) { e.PodUID = string(obj.UID) })
		}
		c.hist.End(ev, err)
		if apierrors.IsAlreadyExists(err) {
			// Made by a try whose answer was lost: gone, for the next start.
			_ = c.deletePod(ctx, p.name)
		}
		if err != nil {
			return err
		}
		m.update(func() { p.obj, p.node, p.setUID, p.evicted = obj, i, types.UID(setUID), false })
	}
	sb, err := c.up(ctx, p, obj, i)
	if err != nil {
		return err
	}
	m.update(func() { p.sb = sb })
	return nil
}

// evict does what the kubelet's node-pressure eviction does: the pod's
// status Failed/Evicted, its sandbox torn down; the object stays.
func (c *cluster) evict(ctx context.Context, m *traffic, p *podState) error {
	sb := p.sb
	ev := c.hist.Begin(Event{Op: opEvict, Pod: c.ns + "/" + p.name, PodUID: string(p.obj.UID), Node: c.nodes[p.node].env.Node})
	err := c.setStatus(ctx, p.name, corev1.PodFailed, "Evicted", nil)
	c.hist.End(ev, err)
	derr := c.down(ctx, p, sb, p.node, ipsOf(sb), "eviction")
	m.update(func() { p.sb, p.evicted = nil, true })
	if err != nil {
		return err
	}
	return derr
}

// remove deletes the pod's object (force) and tears its sandbox down, in
// either order (apiFirst: the object first).
func (c *cluster) remove(ctx context.Context, m *traffic, p *podState, apiFirst bool) error {
	sb := p.sb
	var errs []error
	if apiFirst {
		errs = append(errs, c.deleteObject(ctx, p))
	}
	if sb != nil {
		errs = append(errs, c.down(ctx, p, sb, p.node, ipsOf(sb), "pod deleted"))
	}
	if !apiFirst {
		errs = append(errs, c.deleteObject(ctx, p))
	}
	m.update(func() { p.sb, p.obj, p.evicted = nil, nil, false })
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

func (c *cluster) deleteObject(ctx context.Context, p *podState) error {
	if p.obj == nil {
		return nil
	}
	ev := c.hist.Begin(Event{Op: opDeletePod, Pod: c.ns + "/" + p.name, PodUID: string(p.obj.UID), Node: c.nodes[p.node].env.Node})
	err := c.deletePod(ctx, p.name)
	c.hist.End(ev, err)
	return err
}

// recreate tears the running pod's sandbox down and sets up a new one,
// as the kubelet does when a sandbox dies under a running pod.
func (c *cluster) recreate(ctx context.Context, m *traffic, p *podState) error {
	old := p.sb
	err := c.down(ctx, p, old, p.node, ipsOf(old), "sandbox re-created")
	m.update(func() { p.sb = nil })
	if err != nil {
		return err
	}
	sb, err := c.up(ctx, p, p.obj, p.node)
	if err != nil {
		return err
	}
	m.update(func() { p.sb = sb })
	return nil
}

// mode switches returnAddress for every node.
func (c *cluster) mode(m *traffic, mode config.ReturnMode) error {
	ev := c.hist.Begin(Event{Op: opMode, Value: string(mode)})
	err := try(func() { c.setConfig(mode) })
	c.hist.End(ev, err)
	if err == nil {
		m.update(func() { m.mode = mode })
	}
	return err
}

// update changes the model under its lock.
func (m *traffic) update(f func()) {
	m.mu.Lock()
	defer m.mu.Unlock()
	f()
}
