package reserve

import (
	"fmt"
	"net/netip"
	"strings"
)

// Addresses are compared as values: "fd00:0::1", "FD00::1" and
// "fd00::1/128" are one address. Everything that enters the store, and
// every CIDR read back from an object, goes through NormalizeAddr, so the
// store only ever holds and compares canonical text.

// NormalizeAddr returns the canonical form of an address or CIDR: an
// address, or a CIDR of one address, as the bare address ("fd00::1"); a
// wider CIDR as its masked prefix ("10.1.0.0/24"). IPv4-mapped IPv6
// addresses become IPv4, as Calico treats them.
func NormalizeAddr(s string) (string, error) {
	s = strings.TrimSpace(s)
	if !strings.Contains(s, "/") {
		a, err := netip.ParseAddr(s)
		if err != nil || a.Zone() != "" {
			return "", fmt.Errorf("%q is not an IP address or CIDR", s)
		}
		return a.Unmap().String(), nil
	}
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return "", fmt.Errorf("%q is not an IP address or CIDR: %w", s, err)
	}
	if a := p.Addr(); a.Is4In6() && p.Bits() >= 96 {
		p = netip.PrefixFrom(a.Unmap(), p.Bits()-96)
	}
	if p.IsSingleIP() {
		return p.Addr().String(), nil
	}
	return p.Masked().String(), nil
}

// prefixOf reads a normalised address or CIDR; a bare address is its
// single-address prefix.
func prefixOf(s string) (netip.Prefix, bool) {
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		return p, err == nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, false
	}
	return netip.PrefixFrom(a, a.BitLen()), true
}

// CIDR is what Calico stores for a normalised address: the address with a
// full-length mask, or a wider CIDR as it is.
func CIDR(addr string) string {
	if strings.Contains(addr, "/") {
		return addr
	}
	if strings.Contains(addr, ":") {
		return addr + "/128"
	}
	return addr + "/32"
}

// CompareAddr orders addresses numerically, IPv4 before IPv6, a CIDR after
// the address it starts at; text that does not parse goes last.
func CompareAddr(a, b string) int {
	x, okx := prefixOf(a)
	y, oky := prefixOf(b)
	switch {
	case !okx || !oky:
		if okx != oky {
			if okx {
				return -1
			}
			return 1
		}
		return strings.Compare(a, b)
	case x.Addr().Is4() != y.Addr().Is4():
		if x.Addr().Is4() {
			return -1
		}
		return 1
	}
	if c := x.Addr().Compare(y.Addr()); c != 0 {
		return c
	}
	return y.Bits() - x.Bits()
}
