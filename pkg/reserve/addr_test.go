package reserve

import (
	"slices"
	"testing"
)

func TestNormalizeAddr(t *testing.T) {
	for in, want := range map[string]string{
		"10.0.0.1":            "10.0.0.1",
		" 10.0.0.1 ":          "10.0.0.1",
		"10.0.0.1/32":         "10.0.0.1",
		"fd00:0::1":           "fd00::1",
		"FD00::1":             "fd00::1",
		"fd00::1/128":         "fd00::1",
		"::ffff:10.0.0.1":     "10.0.0.1",
		"10.1.0.0/24":         "10.1.0.0/24",
		"10.1.0.7/24":         "10.1.0.0/24", // the same addresses as Calico reads them
		"FD00:0::/64":         "fd00::/64",
		"::ffff:10.1.0.0/120": "10.1.0.0/24",
	} {
		got, err := NormalizeAddr(in)
		if err != nil || got != want {
			t.Errorf("%q: %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "10.0.0.256", "10.0.0.1/33", "fe80::1%eth0", "10.0.0.1/32/32", "pod-a"} {
		if got, err := NormalizeAddr(bad); err == nil {
			t.Errorf("%q: %q, want an error", bad, got)
		}
	}
}

func TestCIDRKeepsWiderCIDRs(t *testing.T) {
	for in, want := range map[string]string{"10.0.0.1": "10.0.0.1/32", "fd00::1": "fd00::1/128", "10.1.0.0/24": "10.1.0.0/24"} {
		if got := CIDR(in); got != want {
			t.Errorf("%q: %q, want %q", in, got, want)
		}
	}
}

func TestCompareAddr(t *testing.T) {
	got := []string{"fd00::1", "10.0.0.10", "junk", "10.0.0.0/24", "10.0.0.9", "10.0.0.0", "fd00::/64"}
	slices.SortFunc(got, CompareAddr)
	want := []string{"10.0.0.0", "10.0.0.0/24", "10.0.0.9", "10.0.0.10", "fd00::/64", "fd00::1", "junk"}
	if !slices.Equal(got, want) {
		t.Fatalf("%v, want %v", got, want)
	}
}
