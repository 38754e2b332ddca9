package capoctl

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	_ "time/tzdata" // Capo's zone must resolve on a host without zoneinfo

	"github.com/projectcalico/calico/libcalico-go/lib/clientv3"
	cerrors "github.com/projectcalico/calico/libcalico-go/lib/errors"
	"github.com/projectcalico/calico/libcalico-go/lib/options"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/capo-net/capo/pkg/calico"
	"github.com/capo-net/capo/pkg/calico/ipam"
	"github.com/capo-net/capo/pkg/capoadopt"
	"github.com/capo-net/capo/pkg/release"
	"github.com/capo-net/capo/pkg/reserve"
)

// adopter takes over Capo's reservations (capoctl adopt-capo).
type adopter struct{ *cli }

// capoReader is what adopt-capo reads besides capo's store and the
// Kubernetes API: Capo's IPReservation, and whom Calico IPAM allocates an
// address to now.
type capoReader interface {
	// CapoCIDRs is the IPReservation's list; found is false when it is gone.
	CapoCIDRs(ctx context.Context, name string) (cidrs []string, found bool, err error)
	Who(ctx context.Context, addr netip.Addr) (*calico.Holder, error)
}

// dialCapo reaches Calico's datastore as connect does; tests replace it.
var dialCapo = func(cf *kubeFlags) (capoReader, error) {
	r, err := resolve(cf)
	if err != nil {
		return nil, err
	}
	kube, err := kubernetes.NewForConfig(r.rest)
	if err != nil {
		return nil, err
	}
	c, err := calicoFor(r, kube)
	if err != nil {
		return nil, err
	}
	return calicoReader{c}, nil
}

type calicoReader struct{ c clientv3.Interface }

func (r calicoReader) CapoCIDRs(ctx context.Context, name string) ([]string, bool, error) {
	res, err := r.c.IPReservations().Get(ctx, name, options.GetOptions{})
	if errors.As(err, new(cerrors.ErrorResourceDoesNotExist)) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("reading Capo's IPReservation %s: %w", name, err)
	}
	return res.Spec.ReservedCIDRs, true, nil
}

func (r calicoReader) Who(ctx context.Context, addr netip.Addr) (*calico.Holder, error) {
	return ipam.Who(ctx, r.c.IPAM(), addr)
}

// adoptOptions are adopt-capo's flags.
type adoptOptions struct {
	namespace string // Capo's: where its ConfigMap is
	zone      string // --timezone: the TZ of Capo's pod; "" when not given
	dryRun    bool
}

// adoption is what adopt-capo found, and did or would do, per address.
type adoption struct {
	cand   capoadopt.Candidate
	action string
}

// adoptCapo copies Capo's reservations into capo's store with Capo's
// times. It only reads Capo's objects: while Capo runs both hold an
// address, and each releases only its own copy.
func (c adopter) adoptCapo(r capoReader, o adoptOptions) error {
	cidrs, found, err := r.CapoCIDRs(c.ctx, capoadopt.ReservationName)
	if err != nil {
		return err
	}
	if !found {
		fmt.Fprintf(c.out, "Capo's IPReservation %s does not exist: nothing to adopt\n", capoadopt.ReservationName)
		return nil
	}
	times, err := c.capoTimes(o.namespace)
	if err != nil {
		return err
	}
	zone, also, err := c.capoZone(o, len(times) > 0)
	if err != nil {
		return err
	}
	cands, skipped := capoadopt.Read(capoadopt.Source{CIDRs: cidrs, Times: times, Zone: zone, Also: also}, c.now)
	fmt.Fprintf(c.out, "Capo holds %d addresses: IPReservation %s (%d entries with placeholder %s and duplicates), times from ConfigMap %s/%s (%d) read in zone %s\n",
		len(cands), capoadopt.ReservationName, len(cidrs), capoadopt.Placeholder, o.namespace, capoadopt.ConfigMapName, len(times), zone)
	holders := map[string]*calico.Holder{}
	for _, cand := range cands {
		if a, err := netip.ParseAddr(cand.IP); err == nil {
			if holders[cand.IP], err = r.Who(c.ctx, a); err != nil {
				return err
			}
		}
	}
	cands, allocated := capoadopt.Exclude(cands, holders)
	skipped = append(skipped, allocated...)
	rows, err := c.adopt(cands, o.dryRun)
	c.printAdoption(rows, skipped, o.dryRun)
	return err
}

func countAction(rows []adoption, action string) int {
	n := 0
	for _, r := range rows {
		if r.action == action {
			n++
		}
	}
	return n
}

// capoZone is the zone Capo's times are read in, never a guess: Capo
// writes its pod's wall clock with no zone, and read in a zone east of
// the one it was written in every reservation ends early. It is the TZ
// Capo's Deployment gives its manager, or --timezone; when neither says
// it (Capo removed, its TZ from a ConfigMap, none set), adopt-capo stops
// and asks for --timezone, saying why. When --timezone and the Deployment
// disagree, also is the Deployment's: each time is read in both and the
// later kept. needed is false when there is no time to read.
func (c adopter) capoZone(o adoptOptions, needed bool) (zone, also *time.Location, err error) {
	dz, lookErr := c.deployedZone(o.namespace)
	switch {
	case dz.Name != "" && (o.zone == "" || o.zone == dz.Name):
		fmt.Fprintf(c.out, "zone %s: the TZ of Capo's Deployment %s/%s\n", dz.Name, o.namespace, dz.Deployment)
		return loadZone(dz.Name, fmt.Sprintf("TZ %q of Capo's Deployment %s/%s", dz.Name, o.namespace, dz.Deployment))
	case dz.Name != "":
		fmt.Fprintf(c.errw, "capoctl: warning: --timezone %s, but Capo's Deployment %s/%s runs with TZ %s: each time is read in both, and the later kept\n", o.zone, o.namespace, dz.Deployment, dz.Name)
		if also, err = time.LoadLocation(dz.Name); err != nil {
			return nil, nil, fmt.Errorf("TZ %q of Capo's Deployment: %w", dz.Name, err)
		}
		zone, _, err = loadZone(o.zone, "--timezone "+strconv.Quote(o.zone))
		return zone, also, err
	case o.zone != "":
		fmt.Fprintf(c.out, "zone %s: --timezone\n", o.zone)
		return loadZone(o.zone, "--timezone "+strconv.Quote(o.zone))
	case !needed:
		return time.UTC, nil, nil // no time to read: the zone changes nothing
	}
	why := "no Deployment in " + o.namespace + " runs Capo's manager (Capo removed, or not Capo's namespace: --from-namespace)"
	switch {
	case lookErr != nil:
		why = "Capo's Deployment cannot be read: " + lookErr.Error()
	case dz.Deployment != "":
		why = "Capo's Deployment " + o.namespace + "/" + dz.Deployment + " does not say it: " + dz.Unsure
	}
	return nil, nil, fmt.Errorf("cannot tell the zone Capo wrote its times in, and will not guess: a wrong zone shifts every age by its offset, and ends reservations early. %s. Give --timezone with the TZ Capo's manager ran with (Capo's chart and manifests set %s; its image alone runs in UTC)", why, capoadopt.DefaultZone)
}

// deployedZone is what Capo's Deployment says of its zone; an error only
// when the Deployments cannot be listed.
func (c adopter) deployedZone(namespace string) (capoadopt.Zone, error) {
	deploys, err := c.kube.AppsV1().Deployments(namespace).List(c.ctx, metav1.ListOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return capoadopt.Zone{}, fmt.Errorf("listing Deployments in %s: %w", namespace, err)
	}
	if err != nil {
		return capoadopt.Zone{}, nil
	}
	return capoadopt.DeployedZone(deploys.Items), nil
}

func loadZone(name, what string) (*time.Location, *time.Location, error) {
	l, err := time.LoadLocation(name)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w; give --timezone with a zone name such as UTC or Asia/Shanghai", what, err)
	}
	return l, nil, nil
}

// capoTimes is the data of Capo's ConfigMap; none when it is gone.
func (c adopter) capoTimes(namespace string) (map[string]string, error) {
	cm, err := c.kube.CoreV1().ConfigMaps(namespace).Get(c.ctx, capoadopt.ConfigMapName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		fmt.Fprintf(c.errw, "capoctl: warning: no ConfigMap %s/%s (is Capo's namespace --from-namespace?): every address is held one ipReserveTime from now\n", namespace, capoadopt.ConfigMapName)
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading Capo's ConfigMap: %w", err)
	}
	return cm.Data, nil
}

// adopt writes the candidates capo does not hold yet, one write per node.
func (c adopter) adopt(cands []capoadopt.Candidate, dryRun bool) ([]adoption, error) {
	listing, err := c.store.List(c.ctx)
	if err != nil {
		return nil, err
	}
	held := map[string]reserve.Entry{}
	for _, e := range listing.Entries {
		held[e.IP] = e
	}
	rows := make([]adoption, 0, len(cands))
	var todo []capoadopt.Candidate
	ttls := c.ttlLookup()
	for _, cand := range cands {
		ttl, from := ttls.of(cand.Entry)
		switch e, ok := held[cand.IP]; {
		case ok:
			rows = append(rows, adoption{cand: cand, action: fmt.Sprintf("already held by capo (%s, node %s)", e.Reason, e.Node)})
		case !cand.Seen.IsZero() && c.now.Sub(cand.Seen) >= ttl:
			// capo would release it at its next pass: Capo's copy holds it
			// until Capo releases it or its objects are deleted.
			rows = append(rows, adoption{cand: cand, action: "not adopted: expired under " + source(from, ttl)})
		case dryRun:
			rows = append(rows, adoption{cand: cand, action: "would adopt"})
		default:
			todo = append(todo, cand)
		}
	}
	adding := len(todo)
	if dryRun {
		adding = countAction(rows, "would adopt")
	}
	if limit := c.config().IPReserveMaxCount; len(listing.Entries)+adding > limit {
		fmt.Fprintf(c.errw, "capoctl: warning: capo would hold %d reservations, over ipReserveMaxCount %d: the oldest would be released at the next pass (while Capo runs, its own copies still hold them); raise ipReserveMaxCount for the switch\n", len(listing.Entries)+adding, limit)
	}
	var errs []error
	for node, entries := range capoadopt.ByNode(todo) {
		res, err := c.store.Reserve(c.ctx, node, entries)
		for _, cand := range todo {
			if cand.Node != node {
				continue
			}
			switch {
			case err != nil:
				rows = append(rows, adoption{cand: cand, action: "failed: " + err.Error()})
			case slices.Contains(res.Added, cand.IP):
				rows = append(rows, adoption{cand: cand, action: "adopted"})
			default:
				rows = append(rows, adoption{cand: cand, action: "already held by capo"})
			}
		}
		errs = append(errs, err)
	}
	slices.SortFunc(rows, func(a, b adoption) int { return reserve.CompareAddr(a.cand.IP, b.cand.IP) })
	return rows, errors.Join(errs...)
}

func (c adopter) printAdoption(rows []adoption, skipped []capoadopt.Skipped, dryRun bool) {
	ttl := c.config().IPReserveTime
	w := tabwriter.NewWriter(c.out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "IP\tPOD\tNODE\tRESERVED BY CAPO\tAGE\tEXPIRES IN\tACTION")
	counts := map[string]int{}
	for _, r := range rows {
		e := r.cand.Entry
		at, age := "-", "-"
		if !e.Seen.IsZero() {
			at, age = e.Seen.Format(time.RFC3339), human(c.now.Sub(e.Seen))
		}
		action := r.action
		if r.cand.Note != "" {
			action += "; " + r.cand.Note
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", e.IP, e.Namespace+"/"+e.Pod, e.Node, at, age, human(release.Since(e, c.now).Add(ttl).Sub(c.now)), action)
		counts[strings.SplitN(strings.SplitN(r.action, " (", 2)[0], ":", 2)[0]]++
	}
	_ = w.Flush()
	for _, s := range skipped {
		fmt.Fprintf(c.out, "  not adopted: %s: %s\n", s.Addr, s.Why)
	}
	fmt.Fprintf(c.out, "%d adopted, %d would be adopted, %d already held by capo, %d failed, %d not adopted; ipReserveTime %s counts from Capo's time\n",
		counts["adopted"], counts["would adopt"], counts["already held by capo"], counts["failed"], len(skipped)+counts["not adopted"], ttl)
	if dryRun {
		fmt.Fprintln(c.out, "dry run: nothing written; Capo's objects are never changed")
		return
	}
	fmt.Fprintln(c.out, "Capo's objects were not changed: remove Capo's webhook and Capo first, run adopt-capo again, then delete its objects (docs/operations.md, Coming from Capo)")
}
