package agent

import (
	"context"
	"log/slog"
	"net/netip"

	"github.com/capo-net/capo/pkg/calico/ipam"
	"github.com/capo-net/capo/pkg/wire"
)

// notReused drops the addresses Calico has since given to another sandbox
// (its IPAM GC freed them while capo could not answer, or a teardown went
// around capo-ipam): that reuse has happened, and a reservation now would
// hold another pod's address under this pod's name. An address that cannot
// be read is kept: reserving is the safe error. An address cooling in
// Calico's IP cooldown is nobody's yet, and free once cooled: kept.
func notReused(ctx context.Context, r ipam.Reader, handle string, pod wire.PodRef, ips []string) []string {
	out := make([]string, 0, len(ips))
	for _, s := range ips {
		ip, err := netip.ParseAddr(s)
		if err != nil {
			continue
		}
		h, err := ipam.Who(ctx, r, ip)
		if err != nil {
			slog.Debug("address unreadable: kept", "ip", s, "err", err)
		}
		if err == nil && h != nil && !h.Cooling && h.Handle != handle {
			slog.Warn("an address of a teardown capo could not decide in time is already another pod's; not reserving it",
				"pod", pod.Namespace+"/"+pod.Name, "ip", s, "now", h.Handle)
			continue
		}
		out = append(out, s)
	}
	return out
}
