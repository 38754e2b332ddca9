package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/capo-net/capo/test/testbed"
)

// BenchmarkTrace is where capo-ipam's ADD and DEL spend their time beyond
// plain calico-ipam's, step by step, for a pod with and without Calico's
// pool annotation (the DEL of a pod that is not reserved, the cost every
// pod pays), and for a member that gets its address back (ADD/return):
// each round runs plain calico-ipam's ADD and DEL, capo-ipam's
// VERSION (a process start and nothing else, the floor for any IPAM shim)
// and capo-ipam's ADD and DEL, the verb under test traced, interleaved:
//
//	go test -run '^$' -bench Trace -benchtime 100x ./test/e2e/
//
// added-ms is capo's median over plain calico-ipam's, added-paired-ms the
// median of the rounds' differences (steadier); start-ms, the steps
// and exit-ms add up to capo-ms; delegate-extra-ms is the delegate step over
// plain calico-ipam's own median (what running it from capo-ipam costs).
func BenchmarkTrace(b *testing.B) {
	for _, ds := range testbed.Datastores {
		b.Run(string(ds), func(b *testing.B) {
			env := bed.NewEnv(b, ds, testbed.EnvOptions{PoolPrefix: 24})
			pool := fmt.Sprintf(`["%s"]`, env.Pool)
			pods := []struct {
				name  string
				pod   *corev1.Pod
				plain map[string]any // what the calico plugin gives calico-ipam for this pod
			}{
				{"no-annotations", env.CreatePod("trace-0"), nil},
				{
					"pool-annotation", env.CreatePod("trace-1", testbed.WithAnnotations(map[string]string{"cni.projectcalico.org/ipv4pools": pool})),
					map[string]any{"ipv4_pools": []string{env.Pool.String()}},
				},
			}
			for _, verb := range []string{"ADD", "DEL"} {
				for _, c := range pods {
					b.Run(verb+"/"+c.name, func(b *testing.B) { benchTrace(b, env, verb, c.pod, c.plain) })
				}
			}
			// A member on an opted-in node: each capo-ipam DEL reserves its
			// address, each ADD is offered it and takes it back.
			ret := bed.NewEnv(b, ds, testbed.EnvOptions{PoolPrefix: 24, OptIn: true})
			member := ret.CreatePod("trace-0", testbed.StatefulPod("trace"))
			first := ret.NewSandbox(member, nil)
			for _, command := range []string{"ADD", "DEL"} { // the member's address reserved from here on
				if _, err := ret.ExecIPAM(context.Background(), "capo-ipam", command, ret.IPAMNetConf(testbed.Capo), first); err != nil {
					b.Fatal(err)
				}
			}
			b.Run("ADD/return", func(b *testing.B) {
				before := ret.Agent.Metric("capo_agent_address_returns_total", `outcome="offered"`)
				benchTrace(b, ret, "ADD", member, nil)
				if offered := ret.Agent.Metric("capo_agent_address_returns_total", `outcome="offered"`) - before; int(offered) < b.N {
					b.Fatalf("%v of %d ADDs were offered the member's address", offered, b.N)
				}
			})
		})
	}
}

func benchTrace(b *testing.B, env *testbed.Env, verb string, pod *corev1.Pod, plainIPAM map[string]any) {
	ctx := context.Background()
	plain := env.IPAMNetConf(testbed.PlainCalico)
	if plainIPAM != nil {
		var err error
		if plain, err = testbed.WithIPAMKeys(plain, plainIPAM); err != nil {
			b.Fatal(err)
		}
	}
	capo := env.IPAMNetConf(testbed.Capo)
	sb := env.NewSandbox(pod, nil)
	var plainTook, versionTook, start, exit, total []time.Duration
	steps := map[string][]time.Duration{}
	var order []string
	// call runs one capo-ipam verb, traced if it is the verb under test.
	call := func(command string) {
		if command != verb {
			if _, err := env.ExecIPAM(ctx, "capo-ipam", command, capo, sb); err != nil {
				b.Fatal(err)
			}
			return
		}
		tr, err := env.TraceIPAM(ctx, command, capo, sb)
		if err != nil {
			b.Fatal(err)
		}
		total, start, exit = append(total, tr.Total), append(start, tr.Start), append(exit, tr.Exit)
		for _, s := range tr.Steps {
			if _, ok := steps[s.Name]; !ok {
				order = append(order, s.Name)
			}
			steps[s.Name] = append(steps[s.Name], s.Took)
		}
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		sb.ContainerID = testbed.NewContainerID()
		for _, command := range []string{"ADD", "DEL"} {
			took, err := env.ExecIPAM(ctx, "calico-ipam", command, plain, sb)
			if err != nil {
				b.Fatal(err)
			}
			if command == verb {
				plainTook = append(plainTook, took)
			}
		}
		versionTook = append(versionTook, versionCall(b, env))
		sb.ContainerID = testbed.NewContainerID()
		call("ADD")
		call("DEL")
	}
	b.StopTimer()
	med := func(ds []time.Duration) time.Duration { p50, _ := testbed.Percentiles(ds); return p50 }
	b.ReportMetric(testbed.Ms(med(plainTook)), "plain-ms")
	b.ReportMetric(testbed.Ms(med(total)), "capo-ms")
	b.ReportMetric(testbed.Ms(med(total)-med(plainTook)), "added-ms")
	if d, ok := pairedAdded(plainTook, total); ok {
		b.ReportMetric(testbed.Ms(d), "added-paired-ms")
	}
	b.ReportMetric(testbed.Ms(med(versionTook)), "version-ms")
	b.ReportMetric(testbed.Ms(med(start)), "start-ms")
	for _, name := range order {
		b.ReportMetric(testbed.Ms(med(steps[name])), name+"-ms")
	}
	if d, ok := steps["delegate"]; ok {
		b.ReportMetric(testbed.Ms(med(d)-med(plainTook)), "delegate-extra-ms")
	}
	b.ReportMetric(testbed.Ms(med(exit)), "exit-ms")
}

// versionCall times capo-ipam's VERSION: the process start and the
// answer, nothing else.
func versionCall(b *testing.B, env *testbed.Env) time.Duration {
	cmd := exec.Command(filepath.Join(env.BinDir, "capo-ipam"))
	cmd.Env = []string{"CNI_COMMAND=VERSION"}
	cmd.Stdin = bytes.NewReader([]byte(`{"cniVersion":"0.3.1"}`))
	start := time.Now()
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("capo-ipam VERSION: %v: %s", err, out)
	}
	return time.Since(start)
}
