package daemon

import (
	"reflect"
	"runtime/debug"
	"testing"
)

func TestGoMemoryLimitFromTheContainers(t *testing.T) {
	for _, c := range []struct {
		env  map[string]string
		want int64
		ok   bool
	}{
		{env: map[string]string{MemoryLimitEnv: "134217728"}, want: 100663296, ok: true},
		{env: map[string]string{MemoryLimitEnv: "134217728", "GOMEMLIMIT": "50MiB"}},
		{env: map[string]string{MemoryLimitEnv: "0"}},
		{env: map[string]string{MemoryLimitEnv: "128Mi"}},
		{env: map[string]string{}},
	} {
		got, ok := goMemoryLimit(func(k string) string { return c.env[k] })
		if got != c.want || ok != c.ok {
			t.Errorf("%v: got %d %v, want %d %v", c.env, got, ok, c.want, c.ok)
		}
	}
}

func TestReadOnlyMappingsOfTheExecutable(t *testing.T) {
	maps := []byte(`00400000-01e06000 r-xp 00000000 fe:00 9997778 /usr/bin/capo-agent
01e06000-03c42000 r--p 01a06000 fe:00 9997778 /usr/bin/capo-agent
03c42000-03cf8000 rw-p 03842000 fe:00 9997778 /usr/bin/capo-agent
3b9848800000-3b9849400000 rw-p 00000000 00:00 0
7f4faa39d000-7f4faa4f3000 r-xp 00026000 fe:00 326269 /usr/lib/x86_64-linux-gnu/libc.so.6
`)
	want := [][2]uintptr{{0x400000, 0x1e06000}, {0x1e06000, 0x3c42000}}
	if got := readOnlyMappings(maps, "/usr/bin/capo-agent"); !reflect.DeepEqual(got, want) {
		t.Fatalf("got %x, want %x", got, want)
	}
}

// Without GOGC in the environment a daemon collects at gcPercent; with it,
// the operator's value stands.
func TestGCPercent(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	t.Setenv("GOGC", "")
	LimitMemory()
	if got := debug.SetGCPercent(100); got != gcPercent {
		t.Fatalf("GOGC unset: collecting at %d, want %d", got, gcPercent)
	}
	t.Setenv("GOGC", "200")
	LimitMemory()
	if got := debug.SetGCPercent(100); got != 100 {
		t.Fatalf("GOGC=200 in the environment was overridden to %d", got)
	}
}
