package controller

import (
	"testing"

	"github.com/capo-net/capo/pkg/reserve"
)

func TestMatchesManual(t *testing.T) {
	e := reserve.Entry{IP: "10.0.0.2", Namespace: "kafka", Pod: "broker-1"}
	for v, want := range map[string]bool{
		"all":                 true,
		" all ":               true,
		"10.0.0.2":            true,
		"10.0.0.1, 10.0.0.2":  true,
		"10.0.0.20":           false,
		"pod=kafka/broker-1":  true,
		"pod=kafka/broker-10": false,
		"pod=other/broker-1":  false,
		"":                    false,
		"10.0.0.2/32":         true,
		"::ffff:10.0.0.2":     true,
		"10.0.0.0/24":         false,
	} {
		if got := matchesManual(v, e); got != want {
			t.Errorf("%q: %v, want %v", v, got, want)
		}
	}
	e6 := reserve.Entry{IP: "fd00::1"}
	for _, v := range []string{"fd00:0::1", "FD00::1", "fd00::1/128", " fd00:0:0::1 "} {
		if !matchesManual(v, e6) {
			t.Errorf("%q does not match fd00::1", v)
		}
	}
	wide := reserve.Entry{IP: "10.9.0.0/30"} // added by hand
	if !matchesManual("10.9.0.0/30", wide) || matchesManual("10.9.0.0", wide) {
		t.Error("a wider CIDR is released by its own spelling only")
	}
}
