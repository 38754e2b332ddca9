package capoctl

import (
	"encoding/json"
	"errors"
	"fmt"
	"path"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// collector gathers what capoctl bundle writes: capo's own objects, its
// pods' logs and events, and each agent's node view (through pods/exec).
type collector struct{ *cli }

// capoSelector picks capo's own objects, as the chart labels them.
const capoSelector = "app.kubernetes.io/name=capo"

// capoConfigMaps are capo's ConfigMaps by name, labelled or not: the
// config, and the release requests by hand.
var capoConfigMaps = []string{"capo-config", "capo-release"}

// gather reads everything the bundle carries (bundleHelp); nothing stops
// it.
func (c collector) gather(b *bundle, lease string, tail int64) {
	r := c.collect(lease)
	b.json("status.json", r)
	for _, n := range r.Nodes {
		c.gatherNode(b, n)
	}
	nodes, err := c.kube.CoreV1().Nodes().List(c.ctx, metav1.ListOptions{})
	b.yaml("kubernetes/nodes.yaml", nodes, err)
	pods := c.gatherOwn(b, lease)
	c.gatherPods(b, pods, tail)
	rows, err := c.rows(filter{})
	b.yaml("capo/reservations.yaml", rows, err)
	if c.calico != nil {
		objs, errs := c.calico.Objects(c.ctx)
		for name, v := range objs {
			b.yaml("calico/"+name, v, nil)
		}
		for name, err := range errs {
			b.failed("calico/"+name, err)
		}
	}
}

// gatherNode adds one node's agent metrics, and its CNI configs and
// journal from the agent's node-info, run in its container.
func (c collector) gatherNode(b *bundle, n nodeStatus) {
	dir := "nodes/" + n.Node + "/"
	if n.metrics != nil {
		b.text(dir+"agent-metrics.txt", n.metrics, nil)
	}
	if n.pod == nil {
		return
	}
	out, err := c.agentNodeInfo(n.pod)
	if err != nil {
		b.failed(dir+"cni, "+dir+"journal.json", fmt.Errorf("capo-agent %s (pods/exec; an agent older than capoctl has no such command): %w", agentNodeInfoCommand, err))
		return
	}
	var info nodeInfo
	if err := json.Unmarshal(out, &info); err != nil {
		b.failed(dir+"cni, "+dir+"journal.json", fmt.Errorf("capo-agent %s's answer does not decode: %w", agentNodeInfoCommand, err))
		return
	}
	for name, conf := range info.Conflists {
		b.conf(dir+"cni/"+path.Base(name), conf)
	}
	if info.Journal == nil {
		info.Journal = []json.RawMessage{}
	}
	b.json(dir+"journal.json", info.Journal)
	for _, e := range info.Errors {
		b.failed(dir, errors.New("agent: "+e))
	}
}

// gatherOwn adds capo's own objects in its namespace, and the Events
// about them, and gives its pods: nothing else of a shared namespace.
func (c collector) gatherOwn(b *bundle, lease string) []corev1.Pod {
	ns, ctx := c.capoNS, c.ctx
	dir, own := "kubernetes/"+ns+"/", metav1.ListOptions{LabelSelector: capoSelector}
	about := map[string]bool{} // kind/name of what Events may be about
	note := func(kind string, metas ...metav1.ObjectMeta) {
		for _, m := range metas {
			about[kind+"/"+m.Name] = true
		}
	}
	pods, err := c.kube.CoreV1().Pods(ns).List(ctx, own)
	b.yaml(dir+"pods.yaml", pods, err)
	ds, err := c.kube.AppsV1().DaemonSets(ns).List(ctx, own)
	b.yaml(dir+"daemonsets.yaml", ds, err)
	dep, err := c.kube.AppsV1().Deployments(ns).List(ctx, own)
	b.yaml(dir+"deployments.yaml", dep, err)
	cms, err := c.ownConfigMaps()
	b.yaml(dir+"configmaps.yaml", cms, err)
	l, err := c.kube.CoordinationV1().Leases(ns).Get(ctx, lease, metav1.GetOptions{})
	b.yaml(dir+"leases.yaml", l, err)
	if pods == nil {
		return nil
	}
	for _, p := range pods.Items {
		note("Pod", p.ObjectMeta)
	}
	if ds != nil {
		for _, d := range ds.Items {
			note("DaemonSet", d.ObjectMeta)
		}
	}
	if dep != nil {
		for _, d := range dep.Items {
			note("Deployment", d.ObjectMeta)
		}
	}
	for _, cm := range cms.Items {
		note("ConfigMap", cm.ObjectMeta)
	}
	note("Lease", metav1.ObjectMeta{Name: lease})
	evs, err := c.eventsAbout(about)
	b.yaml(dir+"events.yaml", evs, err)
	return pods.Items
}

// ownConfigMaps are capo's ConfigMaps: labelled as capo's, or named as
// capo names them.
func (c collector) ownConfigMaps() (*corev1.ConfigMapList, error) {
	list, err := c.kube.CoreV1().ConfigMaps(c.capoNS).List(c.ctx, metav1.ListOptions{LabelSelector: capoSelector})
	if err != nil {
		return nil, err
	}
	have := map[string]bool{}
	for _, cm := range list.Items {
		have[cm.Name] = true
	}
	for _, name := range capoConfigMaps {
		cm, err := c.kube.CoreV1().ConfigMaps(c.capoNS).Get(c.ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err) || have[name]:
		case err != nil:
			return nil, err
		default:
			list.Items = append(list.Items, *cm)
		}
	}
	return list, nil
}

// eventsAbout are the Events in capo's namespace about the objects named
// kind/name in about.
func (c collector) eventsAbout(about map[string]bool) (*corev1.EventList, error) {
	evs, err := c.kube.CoreV1().Events(c.capoNS).List(c.ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	kept := evs.Items[:0]
	for _, e := range evs.Items {
		if about[e.InvolvedObject.Kind+"/"+e.InvolvedObject.Name] {
			kept = append(kept, e)
		}
	}
	evs.Items = kept
	return evs, nil
}

// gatherPods adds the logs of capo's pods, and the controllers' metrics
// (the agents' are under nodes/).
func (c collector) gatherPods(b *bundle, pods []corev1.Pod, tail int64) {
	for i := range pods {
		p := &pods[i]
		for _, ct := range p.Spec.Containers {
			logs, err := c.kube.CoreV1().Pods(p.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{Container: ct.Name, TailLines: &tail}).DoRaw(c.ctx)
			b.text("logs/"+p.Name+"/"+ct.Name+".log", logs, err)
		}
		if p.Labels["app.kubernetes.io/component"] == "controller" {
			m, err := c.fromPod(p, "/metrics")
			b.text("metrics/"+p.Name+".txt", m, err)
		}
	}
}
