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

// BenchmarkADDTrace is where capo-ipam's ADD spends its time beyond plain
// calico-ipam's, step by step, for a pod with and without Calico's pool
// annotation: each round runs plain calico-ipam's ADD, capo-ipam's VERSION
// (a process start and nothing else, the floor for any IPAM shim) and a
// traced capo-ipam ADD, interleaved, then tears both sandboxes down:
//
//	go test -run '^$' -bench ADDTrace -benchtime 100x ./test/e2e/
//
// added-ms is capo's median over plain calico-ipam's; start-ms, the steps
// and exit-ms add up to capo-ms; delegate-extra-ms is the delegate step over
// plain calico-ipam's own median (what running it from capo-ipam costs).
func BenchmarkADDTrace(b *testing.B) {
	for _, ds := range testbed.Datastores {
		b.Run(string(ds), func(b *testing.B) {
			env := bed.NewEnv(b, ds, testbed.EnvOptions{PoolPrefix: 24})
			pool := fmt.Sprintf(`["%s"]`, env.Pool)
			for _, c := range []struct {
				name  string
				pod   *corev1.Pod
				plain map[string]any // what the calico plugin gives calico-ipam for this pod
			}{
				{"no-annotations", env.CreatePod("trace-0"), nil},
				{
					"pool-annotation", env.CreatePod("trace-1", testbed.WithAnnotations(map[string]string{"cni.projectcalico.org/ipv4pools": pool})),
					map[string]any{"ipv4_pools": []string{env.Pool.String()}},
				},
			} {
				b.Run(c.name, func(b *testing.B) { benchTrace(b, env, c.pod, c.plain) })
			}
		})
	}
}

func benchTrace(b *testing.B, env *testbed.Env, pod *corev1.Pod, plainIPAM map[string]any) {
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
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		sb.ContainerID = testbed.NewContainerID()
		took, err := env.ExecIPAM(ctx, "calico-ipam", "ADD", plain, sb)
		if err != nil {
			b.Fatal(err)
		}
		plainTook = append(plainTook, took)
		if _, err := env.ExecIPAM(ctx, "calico-ipam", "DEL", plain, sb); err != nil {
			b.Fatal(err)
		}
		versionTook = append(versionTook, versionCall(b, env))
		sb.ContainerID = testbed.NewContainerID()
		tr, err := env.TraceIPAM(ctx, "ADD", capo, sb)
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
		if _, err := env.ExecIPAM(ctx, "capo-ipam", "DEL", capo, sb); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	med := func(ds []time.Duration) time.Duration { p50, _ := testbed.Percentiles(ds); return p50 }
	b.ReportMetric(testbed.Ms(med(plainTook)), "plain-ms")
	b.ReportMetric(testbed.Ms(med(total)), "capo-ms")
	b.ReportMetric(testbed.Ms(med(total)-med(plainTook)), "added-ms")
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
