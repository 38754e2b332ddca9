package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/capo-net/capo/test/testbed"
)

// A dual-stack pod's two addresses are reserved together on teardown, and
// released together.
func TestDualStackReservedAndReleasedTogether(t *testing.T) {
	eachDatastore(t, func(t *testing.T, ds testbed.Datastore) {
		ctx := context.Background()
		env := bed.NewEnv(t, ds, testbed.EnvOptions{OptIn: true, DualStack: true})
		env.SetConfig(configWith("ipReserveTime: 3s\n"))
		sb := env.AddPods("cassandra", 1, env.Conflist(testbed.Capo), testbed.WithLabels(map[string]string{"statefulset.kubernetes.io/pod-name": "cassandra-0"}))[0]
		if len(sb.IPs) != 2 || sb.IPs[0].To4() == nil || !env.Pool6.Contains(sb.IPs[1]) {
			t.Fatalf("dual-stack pod got %v", sb.IPs)
		}
		if err := sb.VerifyDataplane(); err != nil {
			t.Fatal(err)
		}
		if err := sb.Del(ctx); err != nil {
			t.Fatal(err)
		}
		held := env.Reservations()
		v4, ok4 := held[sb.IPs[0].String()]
		v6, ok6 := held[sb.IPs[1].String()]
		if !ok4 || !ok6 {
			t.Fatalf("reserved %v; want both %v", held, sb.IPs)
		}
		if v4.Pod != v6.Pod || !v4.ReservedAt.Equal(v6.ReservedAt) {
			t.Fatalf("the two addresses were not reserved together: %+v %+v", v4, v6)
		}
		for _, ip := range sb.IPs {
			if env.Allocated(ip) {
				t.Fatalf("%s still allocated after the release", ip)
			}
		}
		c := env.StartController("c1")
		eventually(t, 15*time.Second, "both released", func() bool { return len(env.Reservations()) == 0 })
		c.WaitMetric(2, "capo_controller_releases_total", `reason="ttl"`)
	})
}

// ipFamilies selects the families under capo-ipam as under calico-ipam.
func TestIPFamiliesParity(t *testing.T) {
	eachRelease(t, testIPFamiliesParity)
}

func testIPFamiliesParity(t *testing.T, ds testbed.Datastore, rel string) {
	ctx := context.Background()
	for _, mode := range []testbed.IPAM{testbed.PlainCalico, testbed.Capo} {
		env := bed.NewEnv(t, ds, testbed.EnvOptions{DualStack: true, CalicoRelease: rel})
		for fam, want := range map[string]string{`["IPv6"]`: "6", `["IPv4"]`: "4", `["IPv4","IPv6"]`: "46"} {
			sb := env.NewSandbox(env.CreatePod("f-"+want, testbed.WithAnnotations(map[string]string{"cni.projectcalico.org/ipFamilies": fam})), env.Conflist(mode))
			if err := sb.Add(ctx); err != nil {
				t.Fatalf("%s %s: %v", mode, fam, err)
			}
			got := ""
			for _, ip := range sb.IPs {
				if ip.To4() != nil {
					got += "4"
				} else {
					got += "6"
				}
			}
			if got != want {
				t.Fatalf("%s with ipFamilies %s got families %q (%v), want %q", mode, fam, got, sb.IPs, want)
			}
		}
		// ipv6pools picks the IPv6 pool by name or CIDR, as under calico-ipam.
		for i, pool := range []string{"pool6-" + env.ID, env.Pool6.String()} {
			sb := env.NewSandbox(env.CreatePod(fmt.Sprintf("v6pool-%d", i), testbed.WithAnnotations(map[string]string{
				"cni.projectcalico.org/ipv6pools": `["` + pool + `"]`, "cni.projectcalico.org/ipFamilies": `["IPv6"]`,
			})), env.Conflist(mode))
			if err := sb.Add(ctx); err != nil || len(sb.IPs) != 1 || !env.Pool6.Contains(sb.IPs[0]) {
				t.Fatalf("%s with ipv6pools %s: %v %v", mode, pool, sb.IPs, err)
			}
		}
		// A pool that does not exist fails under both.
		sb := env.NewSandbox(env.CreatePod("v6pool-none", testbed.WithAnnotations(map[string]string{
			"cni.projectcalico.org/ipv6pools": `["no-such-pool"]`, "cni.projectcalico.org/ipFamilies": `["IPv6"]`,
		})), env.Conflist(mode))
		if err := sb.Add(ctx); err == nil {
			t.Fatalf("%s with ipv6pools naming no pool: got %v", mode, sb.IPs)
		}
	}
}
