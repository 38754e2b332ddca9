package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/capo-net/capo/test/testbed"
)

// BenchmarkIPAM compares calico-ipam called directly with calico-ipam called
// through capo-ipam, interleaved in one run against the same datastore, for
// ADD and for DEL. Run with a fixed count for stable tails:
//
//	go test -run '^$' -bench IPAM -benchtime 200x ./test/e2e/
func BenchmarkIPAM(b *testing.B) {
	for _, ds := range testbed.Datastores {
		b.Run(string(ds), func(b *testing.B) {
			env := bed.NewEnv(b, ds, testbed.EnvOptions{PoolPrefix: 24})
			pod := env.CreatePod("bench-0")
			for _, verb := range []string{"ADD", "DEL"} {
				b.Run(verb, func(b *testing.B) { benchPair(b, env, pod.Name, verb) })
			}
		})
	}
}

type variant struct {
	name, plugin string
	netconf      []byte
	took         []time.Duration
}

func benchPair(b *testing.B, env *testbed.Env, podName, verb string) {
	ctx := context.Background()
	pod, err := env.Kube.CoreV1().Pods(env.Namespace).Get(ctx, podName, getOpts)
	if err != nil {
		b.Fatal(err)
	}
	vs := []*variant{
		{name: "plain", plugin: "calico-ipam", netconf: env.IPAMNetConf(testbed.PlainCalico)},
		{name: "capo", plugin: "capo-ipam", netconf: env.IPAMNetConf(testbed.Capo)},
	}
	sb := env.NewSandbox(pod, env.Conflist(testbed.PlainCalico))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		// Alternate which goes first so neither always sees a warm datastore.
		order := vs
		if i%2 == 1 {
			order = []*variant{vs[1], vs[0]}
		}
		for _, v := range order {
			sb.ContainerID = testbed.NewContainerID()
			addTook, err := env.ExecIPAM(ctx, v.plugin, "ADD", v.netconf, sb)
			if err != nil {
				b.Fatal(err)
			}
			delTook, err := env.ExecIPAM(ctx, v.plugin, "DEL", v.netconf, sb)
			if err != nil {
				b.Fatal(err)
			}
			if verb == "ADD" {
				v.took = append(v.took, addTook)
			} else {
				v.took = append(v.took, delTook)
			}
		}
	}
	b.StopTimer()
	report(b, "plain", vs[0].took, "capo", vs[1].took)
}
