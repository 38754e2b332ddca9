// Package capoadopt reads the reservations of Capo (github.com/xdfdotcn/capo)
// as Capo stores them and turns them into capo entries that keep Capo's
// reservation times, so that ipReserveTime and ipReserveMaxCount continue
// where Capo left off. It is pure: Capo's objects, the time and what Calico
// IPAM holds go in; what to adopt and what to skip, each with why, come out.
// capoctl adopt-capo does the reading and the writing.
//
// What Capo writes (pkg/constants/const.go, pkg/handler/helper.go and
// pkg/handler/ip_housekeeping.go of xdfdotcn/capo):
//   - one cluster-wide IPReservation, ip-reserve-delay-release, whose
//     spec.reservedCIDRs holds bare addresses ("10.1.2.3", no /32) after a
//     permanent placeholder, 1.1.1.1, that only keeps the list non-empty for
//     its JSON patches. The webhook appends without looking, so an address
//     deleted twice is listed twice until the next release pass dedupes;
//   - one ConfigMap of the same name in Capo's namespace (POD_NAMESPACE,
//     "ip-reserve" by default) mapping each address to
//     "<namespace>_<pod>_<node>_<2006-01-02-15:04:05>", the time in the local
//     zone of Capo's pod: no zone is written, and its chart and manifests
//     set TZ=Asia/Shanghai.
//
// Capo releases an address when its ConfigMap time is older than
// ipReserveTime, or oldest first over ipReserveMaxCount; an address listed
// without a readable time is never released by Capo.
package capoadopt

import (
	"fmt"
	"strings"
	"time"

	"github.com/capo-net/capo/pkg/reserve"
)

// Names and formats of Capo's objects, as its source has them.
const (
	ReservationName  = "ip-reserve-delay-release" // cluster-scoped IPReservation
	ConfigMapName    = "ip-reserve-delay-release" // in Capo's namespace
	DefaultNamespace = "ip-reserve"
	Placeholder      = "1.1.1.1" // cons.SystemReserveIP: never a reservation
	TimeLayout       = "2006-01-02-15:04:05"
	DefaultZone      = "Asia/Shanghai" // the TZ Capo's chart and manifests set
)

// Source is what Capo holds.
type Source struct {
	CIDRs []string          // the IPReservation's spec.reservedCIDRs, as stored
	Times map[string]string // the ConfigMap's data: address -> Capo's record
	Zone  *time.Location    // the zone Capo's pod wrote its times in
	// Also is another zone they may have been written in (--timezone and
	// Capo's Deployment disagree): each time is read in both, and the
	// later that is not in the future kept, so that neither reading ends
	// a reservation early.
	Also *time.Location
}

// Candidate is one address Capo holds, as capo would keep it.
type Candidate struct {
	reserve.Entry
	Record string // Capo's ConfigMap value, "" if it has none
	Note   string // why its time is not Capo's, when it is not
}

// Skipped is an address of Capo's objects capo does not adopt.
type Skipped struct {
	Addr string
	Why  string
}

// futureSlack is how far ahead of now a Capo time may be before it is
// taken for a wrong zone rather than clock skew.
const futureSlack = 2 * time.Minute

// Read returns one candidate per address Capo's IPReservation holds, in
// its order, duplicates and the placeholder left out; ConfigMap entries
// whose address Capo no longer holds are skipped (Capo released them).
func Read(src Source, now time.Time) ([]Candidate, []Skipped) {
	var out []Candidate
	var skipped []Skipped
	seen := map[string]bool{}
	for _, cidr := range src.CIDRs {
		addr, err := reserve.NormalizeAddr(cidr)
		switch {
		case err != nil:
			skipped = append(skipped, Skipped{Addr: cidr, Why: "not an address"})
			continue
		case seen[addr]:
			continue // Capo's webhook appends without looking: a duplicate
		case addr == Placeholder:
			seen[addr] = true
			continue
		case strings.Contains(addr, "/"):
			seen[addr] = true
			skipped = append(skipped, Skipped{Addr: addr, Why: "a range: Capo's webhook only adds addresses, so it was added by hand; capo adopts no ranges"})
			continue
		}
		seen[addr] = true
		out = append(out, candidate(addr, lookup(src.Times, addr), src, now))
	}
	for k := range src.Times {
		if addr, err := reserve.NormalizeAddr(k); err != nil || !seen[addr] {
			skipped = append(skipped, Skipped{Addr: k, Why: "in Capo's ConfigMap only: Capo has released it"})
		}
	}
	sortSkipped(skipped)
	return out, skipped
}

// lookup finds an address's record whatever form the key was written in.
func lookup(times map[string]string, addr string) string {
	if v, ok := times[addr]; ok {
		return v
	}
	for k, v := range times {
		if a, err := reserve.NormalizeAddr(k); err == nil && a == addr {
			return v
		}
	}
	return ""
}

// better says whether reading b of a Capo time is kept over reading a (the
// same wall clock in two zones): a reading in the future is of a zone Capo
// did not write in (clock skew aside); of the others, the later, so that
// no reading ends a reservation early.
func better(b, a, now time.Time) bool {
	limit := now.Add(futureSlack)
	switch {
	case b.After(limit):
		return false
	case a.After(limit):
		return true
	}
	return b.After(a)
}

func candidate(addr, record string, src Source, now time.Time) Candidate {
	c := Candidate{Entry: reserve.Entry{IP: addr, Reason: reserve.ReasonCapo}, Record: record}
	zone := src.Zone
	ns, pod, node, at, err := ParseRecord(record, zone)
	if src.Also != nil && err == nil {
		if _, _, _, alt, aerr := ParseRecord(record, src.Also); aerr == nil && better(alt, at, now) {
			at, zone = alt, src.Also
		}
	}
	if err != nil {
		// Capo never releases such an address; capo holds it one TTL from
		// now (the controller's first sight), the safe side.
		c.ReservedAt = now.UTC()
		c.Note = err.Error() + ": held one ipReserveTime from adoption"
		return c
	}
	c.Namespace, c.Pod, c.Node = ns, pod, node
	if at.After(now.Add(futureSlack)) {
		c.Note = fmt.Sprintf("Capo's time %s is in the future in zone %s (wrong --timezone?): held as if reserved now", at.Format(time.RFC3339), zone)
		at = now
	}
	at = at.UTC().Truncate(time.Second)
	// Seen is the controller's clock for the age: Capo's time, so the TTL
	// counts from when Capo reserved, not from the adoption.
	c.ReservedAt, c.Seen = at, at
	return c
}

// ParseRecord reads Capo's "<namespace>_<pod>_<node>_<time>" in zone. No
// Kubernetes name holds '_', so the split is exact.
func ParseRecord(record string, zone *time.Location) (namespace, pod, node string, at time.Time, err error) {
	if record == "" {
		return "", "", "", time.Time{}, fmt.Errorf("no time in Capo's ConfigMap")
	}
	f := strings.Split(record, "_")
	if len(f) != 4 || f[0] == "" || f[1] == "" {
		return "", "", "", time.Time{}, fmt.Errorf("record %q of Capo's is not namespace_pod_node_time", record)
	}
	at, err = time.ParseInLocation(TimeLayout, f[3], zone)
	if err != nil {
		return "", "", "", time.Time{}, fmt.Errorf("record %q of Capo's: time not in %s", record, TimeLayout)
	}
	return f[0], f[1], f[2], at, nil
}
