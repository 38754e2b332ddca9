// Package nativev3 runs the robustness suite on a bed whose Kubernetes
// datastore serves only Calico's native projectcalico.org/v3 CRDs, with a
// calico that runs in that mode (CAPO_CALICO_BIN). Without it the tests
// say so and skip, and no bed starts.
package nativev3

import (
	"os"
	"testing"

	"github.com/capo-net/capo/test/robust"
	"github.com/capo-net/capo/test/testbed"
)

var bed *testbed.Bed

func TestMain(m *testing.M) {
	if os.Getenv(testbed.EnvCalicoBin) == "" {
		os.Exit(m.Run()) // each test says why it skips
	}
	os.Exit(testbed.MainWith(m, &bed, testbed.Options{CalicoCRDs: testbed.NativeV3}))
}

func v3(cfg robust.Config) robust.Config {
	cfg.CalicoRelease, cfg.Package = testbed.CalicoFromEnv, "./test/robust/nativev3/"
	return cfg
}

// The short run in native v3 mode.
func TestRobust(t *testing.T) {
	testbed.SkipWithoutCalicoFromEnv(t)
	robust.Run(t, bed, v3(robust.Short(testbed.Kubernetes))).Fail(t)
}

// The soak in native v3 mode (make soak, with CAPO_CALICO_BIN).
func TestSoak(t *testing.T) {
	testbed.SkipWithoutCalicoFromEnv(t)
	if os.Getenv("CAPO_SOAK") == "" {
		t.Skip("the soak runs with CAPO_SOAK=1 (make soak)")
	}
	d, events := robust.SoakBounds(t)
	robust.Run(t, bed, v3(robust.Soak(testbed.Kubernetes, d, events))).Fail(t)
}
