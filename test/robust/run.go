package robust

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/capo-net/capo/test/testbed"
)

// prepared fills in the seed ($CAPO_ROBUST_SEED, else the clock's), the
// line that replays the run, and the faults that apply.
func (cfg Config) prepared(t *testing.T) Config {
	if cfg.Seed == 0 {
		cfg.Seed = uint64(time.Now().UnixNano())
		if v := os.Getenv(EnvSeed); v != "" {
			s, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				t.Fatalf("%s=%q: want the seed a run printed, a number", EnvSeed, v)
			}
			cfg.Seed = s
		}
	}
	var parts []string
	for _, p := range strings.Split(t.Name(), "/") {
		parts = append(parts, "^"+regexp.QuoteMeta(p)+"$")
	}
	cfg.Replay = fmt.Sprintf("%s=%d go test -count=1 -v -run '%s' %s", EnvSeed, cfg.Seed, strings.Join(parts, "/"), cfg.Package)
	if cfg.Faults == nil {
		cfg.Faults = applicable(cfg)
	}
	return cfg
}

// Run makes one run on bed and returns its figures and what broke. It
// prints the seed first, and each violation as it is found, with the
// history around it and how to replay the run.
func Run(t *testing.T, bed *testbed.Bed, cfg Config) *Report {
	cfg = cfg.prepared(t)
	t.Logf("robust: seed %d, %s datastore; replay: %s", cfg.Seed, cfg.Datastore, cfg.Replay)
	hist := newHistory()
	c, err := newCluster(t, bed, cfg, hist)
	if err != nil {
		t.Fatalf("robust: setting the cluster up: %v", err)
	}
	defer c.keepLogs(t)
	start := time.Now()
	var outMu sync.Mutex
	chk := newChecker(c, func(s string) { outMu.Lock(); defer outMu.Unlock(); t.Log(s) })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c.keepAllUp(ctx)
	go chk.run(ctx)
	in := &injector{c: c, r: rand.New(rand.NewPCG(cfg.Seed, 2)), kinds: cfg.Faults, running: map[string]bool{}, errs: make(chan error, 1)}
	fctx, stopFaults := context.WithCancel(ctx)
	go in.run(fctx)
	ops, derr := c.drive(ctx, newTraffic(cfg), rand.New(rand.NewPCG(cfg.Seed, 1)), in.errs)
	stopFaults()
	in.wait()
	if derr != nil {
		t.Fatalf("robust: the run could not go on (seed %d): %v", cfg.Seed, derr)
	}
	trafficEnd := time.Now()
	chk.settle(ctx)
	rep := chk.report(ops, start, trafficEnd)
	t.Log(rep.String())
	return rep
}

// drive runs the traffic on cfg.Workers workers until the run's time or
// operations are up, or a fault could not be made.
func (c *cluster) drive(ctx context.Context, m *traffic, r *rand.Rand, errs <-chan error) (*opCounts, error) {
	counts := &opCounts{ran: map[string]int{}, failed: map[string]int{}}
	work := make(chan *op)
	var wg sync.WaitGroup
	for range c.cfg.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for o := range work {
				counts.add(o.kind, c.do(ctx, m, o))
			}
		}()
	}
	defer func() { close(work); wg.Wait() }()
	deadline := time.Now().Add(c.cfg.Duration)
	for n := 0; time.Now().Before(deadline) && (c.cfg.Events == 0 || n < c.cfg.Events); {
		select {
		case err := <-errs:
			return counts, err
		default:
		}
		o := m.next(r, c.cfg)
		if o == nil {
			time.Sleep(50 * time.Millisecond)
			continue
		}
		work <- o
		n++
	}
	return counts, nil
}

// SoakBounds are the soak's CAPO_SOAK_DURATION (default 15m) and
// CAPO_SOAK_EVENTS (default 5000), per datastore: it ends at the first.
func SoakBounds(t *testing.T) (time.Duration, int) {
	d, events := 15*time.Minute, 5000
	if v := os.Getenv("CAPO_SOAK_DURATION"); v != "" {
		var err error
		if d, err = time.ParseDuration(v); err != nil {
			t.Fatalf("CAPO_SOAK_DURATION=%q: want a duration such as 15m", v)
		}
	}
	if v := os.Getenv("CAPO_SOAK_EVENTS"); v != "" {
		var err error
		if events, err = strconv.Atoi(v); err != nil || events < 1 {
			t.Fatalf("CAPO_SOAK_EVENTS=%q: want a positive number", v)
		}
	}
	return d, events
}
