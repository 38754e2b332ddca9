package capoctl

import (
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/capo-net/capo/pkg/config"
	"github.com/capo-net/capo/pkg/release"
	"github.com/capo-net/capo/pkg/reserve"
	"github.com/capo-net/capo/pkg/selection"
)

type filter struct{ node, namespace, pod string }

func (f filter) match(e reserve.Entry) bool {
	return (f.node == "" || e.Node == f.node) &&
		(f.namespace == "" || e.Namespace == f.namespace) &&
		(f.pod == "" || e.Namespace+"/"+e.Pod == f.pod)
}

// config is the one in force, or the defaults if there is none; read once
// per command.
func (c *cli) config() *config.Config {
	if c.cfg == nil {
		c.cfg = config.Default()
		if cm, err := c.kube.CoreV1().ConfigMaps(c.capoNS).Get(c.ctx, "capo-config", metav1.GetOptions{}); err == nil {
			if cfg, err := config.Parse([]byte(cm.Data[config.ConfigMapKey])); err == nil {
				c.cfg = cfg
			}
		}
	}
	return c.cfg
}

// row is one reservation as list prints it.
type row struct {
	IP         string     `json:"ip"`
	Namespace  string     `json:"namespace,omitempty"`
	Pod        string     `json:"pod,omitempty"`
	PodUID     string     `json:"podUID,omitempty"`
	Node       string     `json:"node"`
	Reason     string     `json:"reason"`
	ReservedAt time.Time  `json:"reservedAt"`
	Seen       *time.Time `json:"seen,omitempty"` // by capo-controller's clock
	ExpiresAt  time.Time  `json:"expiresAt"`
	// ReserveTime is how long it is held; ReserveTimeFrom says whose it
	// is: config (ipReserveTime), pod, statefulset or namespace.
	ReserveTime     string `json:"reserveTime"`
	ReserveTimeFrom string `json:"reserveTimeFrom"`
	OwnerKind       string `json:"ownerKind,omitempty"`
	OwnerName       string `json:"ownerName,omitempty"`
	// ref is the entry shown: a release ends it only if it is still held
	// as shown, not a teardown reserved at the same place since.
	ref reserve.Ref
}

func (c *cli) rows(f filter) ([]row, error) {
	listing, err := c.store.List(c.ctx)
	if err != nil {
		return nil, err
	}
	for _, u := range listing.Unreadable {
		fmt.Fprintf(c.errw, "capoctl: warning: %s does not decode (%v); its %d addresses stay reserved and are not listed\n", u.Object, u.Err, u.Addresses)
	}
	ttls := c.ttlLookup()
	out := []row{}
	for _, e := range listing.Entries {
		if f.match(e) {
			ttl, from := ttls.of(e)
			r := row{
				IP: e.IP, Namespace: e.Namespace, Pod: e.Pod, PodUID: e.PodUID, Node: e.Node, Reason: e.Reason,
				ReservedAt: e.ReservedAt, ExpiresAt: release.Since(e, c.now).Add(ttl), OwnerKind: e.OwnerKind, OwnerName: e.OwnerName, ref: e.Ref(),
				ReserveTime: ttl.String(), ReserveTimeFrom: from,
			}
			if !e.Seen.IsZero() {
				r.Seen = &e.Seen
			}
			out = append(out, r)
		}
	}
	slices.SortStableFunc(out, func(a, b row) int { return strings.Compare(a.Node, b.Node) })
	return out, nil
}

func (c *cli) list(f filter, o *output) error {
	rows, err := c.rows(f)
	if err != nil {
		return err
	}
	return o.print(c.out, rows, func(wide bool) error {
		w := tabwriter.NewWriter(c.out, 0, 4, 2, ' ', 0)
		head := "IP\tPOD\tNODE\tREASON\tAGE\tEXPIRES IN\tRESERVE TIME"
		if wide {
			head += "\tOWNER\tPOD UID\tSEEN"
		}
		fmt.Fprintln(w, head)
		for _, r := range rows {
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s (%s)", r.IP, r.Namespace+"/"+r.Pod, r.Node, r.Reason, human(c.now.Sub(r.ReservedAt)), human(r.ExpiresAt.Sub(c.now)), r.ReserveTime, r.ReserveTimeFrom)
			if wide {
				seen := "<not yet>"
				if r.Seen != nil {
					seen = human(c.now.Sub(*r.Seen)) + " ago"
				}
				fmt.Fprintf(w, "\t%s\t%s\t%s", orNone(r.OwnerKind, r.OwnerName), orNone(r.PodUID, ""), seen)
			}
			fmt.Fprintln(w)
		}
		_ = w.Flush()
		if len(rows) == 0 {
			fmt.Fprintln(c.out, "(no reservations)")
		}
		evs, err := c.returns(f)
		if err != nil {
			return err
		}
		c.printReturns(evs)
		return nil
	})
}

func (c *cli) release(ips []string, pod, node string, all, yes bool) error {
	if err := releaseArgs(ips, pod, node, all); err != nil {
		return err
	}
	want := map[string]bool{}
	for _, ip := range ips {
		addr, err := reserve.NormalizeAddr(ip) // as values: FD00:0::1 is fd00::1
		if err != nil {
			return err
		}
		want[addr] = true
	}
	rows, err := c.rows(filter{node: node, pod: pod})
	if err != nil {
		return err
	}
	if len(ips) > 0 {
		rows = slices.DeleteFunc(rows, func(r row) bool { return !want[r.IP] })
	}
	if len(rows) == 0 {
		return fmt.Errorf("nothing held matches")
	}
	for _, r := range rows {
		fmt.Fprintf(c.out, "  %s  %s/%s  node %s  held %s\n", r.IP, r.Namespace, r.Pod, r.Node, human(c.now.Sub(r.ReservedAt)))
	}
	if !yes && !c.confirm(fmt.Sprintf("Release these %d reservations (the addresses become allocatable)?", len(rows))) {
		fmt.Fprintln(c.out, "nothing released")
		return nil
	}
	refs := make([]reserve.Ref, 0, len(rows))
	for _, r := range rows {
		refs = append(refs, r.ref)
	}
	// By hand: the same teardowns are not reserved again (a coverage, a
	// journal replayed later).
	done, err := c.store.ReleaseByHand(c.ctx, refs, c.now)
	fmt.Fprintf(c.out, "released %d\n", len(done))
	if changed := len(rows) - len(done); err == nil && changed > 0 {
		fmt.Fprintf(c.out, "%d changed since listed (reserved again, or released by someone else): kept; list again to see them\n", changed)
	}
	return err
}

func (c *cli) explain(ref string) error {
	ns, name, ok := strings.Cut(ref, "/")
	if !ok {
		return fmt.Errorf("%q: want NAMESPACE/NAME", ref)
	}
	pod, err := c.kube.CoreV1().Pods(ns).Get(c.ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	var node *corev1.Node
	if pod.Spec.NodeName != "" {
		if node, err = c.kube.CoreV1().Nodes().Get(c.ctx, pod.Spec.NodeName, metav1.GetOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	nsObj, err := c.kube.CoreV1().Namespaces().Get(c.ctx, ns, metav1.GetOptions{})
	if err != nil {
		return err
	}
	cfg := c.config()
	d := selection.Decide(selection.Of(node), selection.Of(nsObj), selection.Of(pod), cfg.Selectors)
	verdict := map[selection.Verdict]string{
		selection.Selected:       "RESERVED on teardown",
		selection.NotSelected:    "released on teardown, as plain Calico would",
		selection.NodeNotOptedIn: "released on teardown, as plain Calico would",
	}[d.Verdict]
	fmt.Fprintf(c.out, "pod %s on node %q: %s\n  rule: %s\n", ref, pod.Spec.NodeName, verdict, d.Rule)
	fmt.Fprintf(c.out, "  node opted in: %v (annotation or label %s=%s)\n", selection.NodeOptedIn(selection.Of(node)), selection.NodeAnnotation, selection.Enabled)
	fmt.Fprintf(c.out, "  namespace %s label %s=%q\n", ns, selection.NamespaceLabel, nsObj.Labels[selection.NamespaceLabel])
	if v := pod.Annotations[selection.PodAnnotation]; v != "" {
		fmt.Fprintf(c.out, "  pod annotation %s=%s\n", selection.PodAnnotation, v)
	}
	if key := selection.FixedAddress(selection.Of(pod)); key != "" && selection.NodeOptedIn(selection.Of(node)) {
		fmt.Fprintf(c.out, "  WARNING: %s: the calico plugin rejects this pod on an opted-in node\n", key)
	}
	if d.Verdict == selection.Selected {
		ttls := c.ttlLookup()
		e := reserve.Entry{Namespace: ns, Pod: name}
		e.SetPod(pod)
		ttl, from := ttls.of(e)
		fmt.Fprintf(c.out, "  a reservation lasts up to %s, less if more than %d are held, or once its workload is gone\n", source(from, ttl), cfg.IPReserveMaxCount)
		for obj, why := range ttls.invalid {
			fmt.Fprintf(c.out, "  WARNING: %s: %s; ignored\n", obj, why)
		}
		c.explainPolicy(e)
	}
	if err := c.explainReturn(pod, d); err != nil {
		return err
	}
	rows, err := c.rows(filter{pod: ref})
	if err != nil {
		return err
	}
	for _, r := range rows {
		fmt.Fprintf(c.out, "  held now: %s (%s, %s ago, expires in %s)\n", r.IP, r.Reason, human(c.now.Sub(r.ReservedAt)), human(r.ExpiresAt.Sub(c.now)))
	}
	return nil
}

// orNone is kind/name, or <none> as kubectl prints an empty cell.
func orNone(kind, name string) string {
	switch {
	case kind == "":
		return "<none>"
	case name == "":
		return kind
	}
	return kind + "/" + name
}

// human is a short duration, kubectl style.
func human(d time.Duration) string {
	switch {
	case d < 0:
		return "due"
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm%ds", int(d.Minutes()), int(d.Seconds())%60)
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh%dm", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}
