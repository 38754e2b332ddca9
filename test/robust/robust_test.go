package robust

import (
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/capo-net/capo/pkg/failpoint"
	"github.com/capo-net/capo/test/testbed"
)

var bed *testbed.Bed

func TestMain(m *testing.M) { os.Exit(testbed.Main(m, &bed)) }

// The short run, on each datastore: a random sequence of what a cluster
// does to its pods under every fault, and no invariant broken.
func TestRobust(t *testing.T) {
	for _, ds := range testbed.Datastores {
		t.Run(string(ds), func(t *testing.T) {
			Run(t, bed, Short(ds)).Fail(t)
		})
	}
}

// The soak `make soak` runs: CAPO_SOAK_DURATION (default 15m) or
// CAPO_SOAK_EVENTS operations (default 5000) per datastore, whichever
// comes first.
func TestSoak(t *testing.T) {
	if os.Getenv("CAPO_SOAK") == "" {
		t.Skip("the soak runs with CAPO_SOAK=1 (make soak)")
	}
	d, events := SoakBounds(t)
	for _, ds := range testbed.Datastores {
		t.Run(string(ds), func(t *testing.T) {
			Run(t, bed, Soak(ds, d, events)).Fail(t)
		})
	}
}

// The checker can fail: with every agent answering "nothing to reserve"
// for a selected pod's addresses (a failpoint that is that bug), capo-ipam
// releases them unreserved, and the suite reports it, with the seed that
// replays it.
func TestCheckerFindsAnAddressFreedUnreserved(t *testing.T) {
	cfg := Short(testbed.Etcd)
	cfg.Duration = 15 * time.Second
	cfg.Faults = []string{fAPIErrors} // no fault needed to find it
	cfg.AgentFailpoints = failpoint.AgentNothingToReserve + "=error"
	rep := Run(t, bed, cfg)
	var found []Violation
	for _, v := range rep.Violations {
		if v.Kind == vFreeUnreserved {
			found = append(found, v)
		}
	}
	if len(found) == 0 {
		t.Fatalf("with %s armed the checker found no selected address free and unreserved:%s", cfg.AgentFailpoints, rep)
	}
	replay := EnvSeed + "=" + strconv.FormatUint(rep.Seed, 10) + " go test"
	told := ""
	for _, s := range rep.Told {
		if strings.Contains(s, "VIOLATION "+vFreeUnreserved) {
			told = s
			break
		}
	}
	if !strings.Contains(rep.String(), "seed "+strconv.FormatUint(rep.Seed, 10)) || !strings.Contains(told, replay) || !strings.Contains(told, "history around it:\n  ") {
		t.Fatalf("the report does not name the seed %d, or the violation as told lacks %q or the history:%s\n%s", rep.Seed, replay, rep, told)
	}
	t.Logf("the checker found %d such addresses, the first: %s", len(found), found[0].What)
}
