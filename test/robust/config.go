package robust

import (
	"time"

	"github.com/capo-net/capo/test/testbed"
)

// EnvSeed replays a run: the seed it printed.
const EnvSeed = "CAPO_ROBUST_SEED"

// Config is one run.
type Config struct {
	Seed          uint64
	Datastore     testbed.Datastore
	CalicoRelease string // the nodes' Calico (testbed.CalicoFromEnv for native v3)
	Package       string // the test package, for the replay line
	Duration      time.Duration
	Events        int // stop after this many operations, if sooner (0: none)
	Workers       int // operations at once, as a node's kubelet runs several
	Nodes         int
	PoolPrefix    int // the one pool every node shares: small, under pressure
	Sets          []string
	MaxReplicas   int
	PlainPods     int
	TTL           time.Duration // ipReserveTime
	MaxCount      int           // ipReserveMaxCount
	LeakGrace     time.Duration // Calico's GC's, when it runs
	SampleEvery   time.Duration
	FaultEvery    time.Duration // between faults, on average
	FaultMin      time.Duration // how long one lasts
	FaultMax      time.Duration
	Faults        []string // the kinds injected; nil: all that apply
	// Apart are kinds that never run at once, as if one kind. make test's
	// short run keeps a node's agent faults and the conflist rewrite
	// apart: with no controller leading as well, they make a gap no capo
	// process can close (docs/robustness.md: a pod started and torn down
	// through the rewritten conflist while its node's agent is down and
	// no replica leads, reserved only after the fact); make soak keeps
	// them free.
	Apart []string
	// AgentFailpoints are armed in every agent for the whole run: the
	// proof that the checker finds a broken invariant.
	AgentFailpoints string
	Replay          string // how to replay this run (set by Run)
}

// Short is the run `make test` makes: under a minute of traffic.
func Short(ds testbed.Datastore) Config {
	return Config{
		Datastore: ds, Package: "./test/robust/", Duration: 35 * time.Second, Workers: 2, Nodes: 2, PoolPrefix: 28,
		Sets: []string{"db", "mq"}, MaxReplicas: 3, PlainPods: 3, TTL: 20 * time.Second, MaxCount: 6,
		LeakGrace: 10 * time.Second, SampleEvery: 400 * time.Millisecond,
		FaultEvery: 3 * time.Second, FaultMin: time.Second, FaultMax: 6 * time.Second,
		Apart: []string{fConflist, fAgentKill, fAgentFP},
	}
}

// Soak is `make soak`'s run: many more operations, longer faults.
func Soak(ds testbed.Datastore, d time.Duration, events int) Config {
	c := Short(ds)
	c.Duration, c.Events, c.Workers = d, events, 3
	c.MaxReplicas, c.TTL, c.LeakGrace = 4, 30*time.Second, 20*time.Second
	c.FaultEvery, c.FaultMax = 5*time.Second, 10*time.Second
	c.Apart = nil
	return c
}

// applicable are the faults the bed can make for cfg: libcalico-go's
// kube-controllers cannot run against native projectcalico.org/v3 CRDs.
func applicable(cfg Config) []string {
	var out []string
	for _, f := range AllFaults {
		if f == fGC && cfg.CalicoRelease == testbed.CalicoFromEnv && cfg.Datastore == testbed.Kubernetes {
			continue
		}
		out = append(out, f)
	}
	return out
}
