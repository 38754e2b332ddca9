package e2e

import (
	"context"
	"slices"
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

// BenchmarkIPAMMemory compares the resident-memory peak of a calico-ipam call
// with that of the same call through capo-ipam, for ADD and DEL of a pod on a
// node that is not opted in (the cost every pod pays). capo-ipam stays
// resident while calico-ipam runs, so capo's footprint is capo-ipam's own
// peak plus calico-ipam's:
//
//	go test -run '^$' -bench IPAMMemory -benchtime 50x ./test/e2e/
func BenchmarkIPAMMemory(b *testing.B) {
	for _, ds := range testbed.Datastores {
		b.Run(string(ds), func(b *testing.B) {
			env := bed.NewEnv(b, ds, testbed.EnvOptions{PoolPrefix: 24})
			sb := env.NewSandbox(env.CreatePod("bench-0"), env.Conflist(testbed.PlainCalico))
			plain, capo := env.IPAMNetConf(testbed.PlainCalico), env.IPAMNetConf(testbed.Capo)
			for _, verb := range []string{"ADD", "DEL"} {
				b.Run(verb, func(b *testing.B) {
					var calicoPeak, shimPeak []int64
					for i := 0; i < b.N; i++ {
						for _, v := range []struct {
							plugin  string
							netconf []byte
						}{{"calico-ipam", plain}, {"capo-ipam", capo}} {
							sb.ContainerID = testbed.NewContainerID()
							add, err := env.ExecIPAMPeaks(context.Background(), v.plugin, "ADD", v.netconf, sb)
							if err != nil {
								b.Fatal(err)
							}
							del, err := env.ExecIPAMPeaks(context.Background(), v.plugin, "DEL", v.netconf, sb)
							if err != nil {
								b.Fatal(err)
							}
							p := add
							if verb == "DEL" {
								p = del
							}
							if v.plugin == "calico-ipam" {
								calicoPeak = append(calicoPeak, p.Process)
							} else if p.Shim <= 0 {
								b.Fatalf("capo-ipam %s did not reach calico-ipam through the probe", verb)
							} else {
								shimPeak = append(shimPeak, p.Shim)
							}
						}
					}
					reportMemory(b, median(calicoPeak), median(shimPeak))
				})
			}
		})
	}
}

func reportMemory(b *testing.B, calico, shim int64) {
	const mib = 1 << 20
	b.ReportMetric(float64(calico)/mib, "calico-ipam-MiB")
	b.ReportMetric(float64(shim)/mib, "capo-ipam-MiB")
	b.ReportMetric(float64(calico+shim)/float64(calico), "capo-ratio")
}

func median(xs []int64) int64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}
