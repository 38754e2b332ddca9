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
	} {
		if got := matchesManual(v, e); got != want {
			t.Errorf("%q: %v, want %v", v, got, want)
		}
	}
}
