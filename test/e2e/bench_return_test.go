package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/capo-net/capo/test/testbed"
)

// BenchmarkADDReturn compares, interleaved in one run on an opted-in node,
// calico-ipam's ADD with capo-ipam's ADD of a StatefulSet pod that gets
// its reserved address back, and of one with nothing held (the price every
// other selected pod pays):
//
//	go test -run '^$' -bench ADDReturn -benchtime 100x ./test/e2e/
func BenchmarkADDReturn(b *testing.B) {
	for _, ds := range testbed.Datastores {
		b.Run(string(ds), func(b *testing.B) { benchReturn(b, ds) })
	}
}

type returnVariant struct {
	name     string
	add, del string // the plugin each verb runs
	sb       *testbed.Sandbox
	took     []time.Duration
}

func benchReturn(b *testing.B, ds testbed.Datastore) {
	ctx := context.Background()
	env := bed.NewEnv(b, ds, testbed.EnvOptions{OptIn: true})
	plain, capo := env.IPAMNetConf(testbed.PlainCalico), env.IPAMNetConf(testbed.Capo)
	netconf := map[string][]byte{"calico-ipam": plain, "capo-ipam": capo}
	sandbox := func(name, set string) *testbed.Sandbox {
		return env.NewSandbox(env.CreatePod(name, testbed.StatefulPod(set)), env.Conflist(testbed.PlainCalico))
	}
	vs := []*returnVariant{
		{name: "plain", add: "calico-ipam", del: "calico-ipam", sb: sandbox("plain-0", "plain")},
		{name: "nothing-held", add: "capo-ipam", del: "calico-ipam", sb: sandbox("kafka-0", "kafka")},
		{name: "return", add: "capo-ipam", del: "capo-ipam", sb: sandbox("redis-0", "redis")},
	}
	// redis-0 holds its address from here on: each DEL reserves it, each
	// ADD gets it back.
	cycle := func(v *returnVariant) time.Duration {
		v.sb.ContainerID = testbed.NewContainerID()
		took, err := env.ExecIPAM(ctx, v.add, "ADD", netconf[v.add], v.sb)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := env.ExecIPAM(ctx, v.del, "DEL", netconf[v.del], v.sb); err != nil {
			b.Fatal(err)
		}
		return took
	}
	cycle(vs[2])
	if len(env.Reservations()) != 1 {
		b.Fatalf("redis-0's DEL reserved %v", env.Reservations())
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for j := range vs { // rotate who goes first
			v := vs[(i+j)%len(vs)]
			v.took = append(v.took, cycle(v))
		}
	}
	b.StopTimer()
	// IPAM alone writes no workload endpoint, so no return is confirmed
	// (outcome returned): each ADD is offered the address and takes it.
	offered, fellBack := env.Agent.Metric("capo_agent_address_returns_total", `outcome="offered"`), env.Agent.Metric("capo_agent_address_returns_total", `outcome="fell-back"`)
	if int(offered) != b.N || fellBack != 0 {
		b.Fatalf("%v of %d ADDs offered redis-0 its address, %v fell back", offered, b.N, fellBack)
	}
	report(b, "plain", vs[0].took, "return", vs[2].took)
	p50b, _ := testbed.Percentiles(vs[0].took)
	p50, _ := testbed.Percentiles(vs[1].took)
	b.ReportMetric(testbed.Ms(p50), "nothing-held-p50-ms")
	b.ReportMetric(float64(p50)/float64(p50b), "nothing-held-ratio-p50")
}
