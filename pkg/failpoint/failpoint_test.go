package failpoint

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

func arm(t *testing.T, spec string) {
	t.Helper()
	if err := Arm(spec); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = Arm("") })
}

func TestArmRefusesWhatItCannotDo(t *testing.T) {
	for _, tc := range []struct{ spec, says string }{
		{"agent/reserved", "want point=action"},
		{"agent/reserve=exit", "is no failpoint; known: agent/nothing-to-reserve, agent/offer"},
		{"agent/offer=error", "cannot fail with an error"},
		{"agent/reserved=0%exit", "1 to 100"},
		{"agent/reserved=101%exit", "1 to 100"},
		{"agent/reserved=0*exit", "positive number"},
		{"agent/reserved=sleep(-1s)", "positive duration"},
		{"agent/reserved=sleep(soon)", "positive duration"},
		{"agent/reserved=crash", "panic, exit, sleep(duration) or error"},
	} {
		err := Arm(tc.spec)
		if err == nil || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("Arm(%q) = %v, want an error saying %q", tc.spec, err, tc.says)
		}
	}
	if armed.Load() != nil {
		t.Fatal("a refused spec armed something")
	}
}

func TestUnarmedPointsDoNothing(t *testing.T) {
	arm(t, AgentOffer+"=panic")
	Hit(AgentSettle) // armed table, other point
	if err := Or(AgentReserved, nil); err != nil {
		t.Fatal(err)
	}
	v := []string{"10.0.0.1"}
	Clear(AgentNothingToReserve, &v)
	if len(v) != 1 {
		t.Fatal("Clear dropped a value for an unarmed point")
	}
	arm(t, "")
	Hit(AgentOffer) // disarmed: no panic
}

func TestErrorActions(t *testing.T) {
	arm(t, AgentReserved+"=error;"+AgentNothingToReserve+"=error")
	var fp *Error
	if err := Or(AgentReserved, nil); !errors.As(err, &fp) || fp.Point != AgentReserved {
		t.Fatalf("Or = %v, want the point's error", err)
	}
	writeErr := errors.New("the write failed")
	if err := Or(AgentReserved, writeErr); err != writeErr {
		t.Fatalf("Or kept %v over the real error", err)
	}
	v := []string{"10.0.0.1"}
	Clear(AgentNothingToReserve, &v)
	if v != nil {
		t.Fatalf("Clear left %v", v)
	}
}

func TestCountAndShare(t *testing.T) {
	arm(t, AgentReserved+"=2*error")
	fired := 0
	for range 10 {
		if Or(AgentReserved, nil) != nil {
			fired++
		}
	}
	if fired != 2 {
		t.Fatalf("2*error fired %d times in 10 hits", fired)
	}
	arm(t, AgentReserved+"=30%error")
	fired = 0
	for range 2000 {
		if Or(AgentReserved, nil) != nil {
			fired++
		}
	}
	if fired < 450 || fired > 750 {
		t.Fatalf("30%%error fired %d times in 2000 hits", fired)
	}
}

func TestSleepAndPanic(t *testing.T) {
	arm(t, AgentOffer+"=1*sleep(50ms);"+AgentSettle+"=panic")
	start := time.Now()
	Hit(AgentOffer)
	if d := time.Since(start); d < 50*time.Millisecond {
		t.Fatalf("slept %s", d)
	}
	defer func() {
		if r := recover(); r == nil || !strings.Contains(r.(string), AgentSettle) {
			t.Fatalf("recovered %v, want the point's panic", r)
		}
	}()
	Hit(AgentSettle)
}

// An exit action ends the process at once with ExitCode, as a crash does;
// the environment variable arms it as the process starts.
func TestExitFromTheEnvironment(t *testing.T) {
	if os.Getenv("FAILPOINT_CHILD") == "1" {
		Hit(PluginBeforeRelease)
		os.Exit(0)
	}
	cmd := exec.Command(os.Args[0], "-test.run", "^TestExitFromTheEnvironment$")
	cmd.Env = append(os.Environ(), "FAILPOINT_CHILD=1", EnvVar+"="+PluginBeforeRelease+"=exit")
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != ExitCode || !strings.Contains(string(out), "capo failpoint plugin/before-release: exit") {
		t.Fatalf("child: %v: %s", err, out)
	}
	cmd = exec.Command(os.Args[0], "-test.run", "^$")
	cmd.Env = append(os.Environ(), EnvVar+"=agent/typo=exit")
	out, err = cmd.CombinedOutput()
	if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(string(out), "is no failpoint") {
		t.Fatalf("a typo in %s must stop the process: %v: %s", EnvVar, err, out)
	}
}

// BenchmarkUnarmed is what a point costs in production.
func BenchmarkUnarmed(b *testing.B) {
	_ = Arm("")
	for range b.N {
		Hit(AgentReserved)
	}
}
