package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"net"
	"slices"
	"testing"

	"github.com/capo-net/capo/test/testbed"
)

// step is one runtime action in a scripted pod lifecycle.
type step struct {
	op  string // add, del, rmns (netns vanishes, as on reboot)
	sb  string // sandbox key; container IDs derive from it so both runs share handles
	pod string
}

var script = []step{
	{"add", "s0", "p0"},
	{"add", "s1", "p1"},
	{"add", "s2", "p2"},
	{"add", "s3", "p3"},
	{"del", "s1", "p1"},
	{"add", "s4", "p4"},
	{"del", "s1", "p1"}, // DEL twice
	{"add", "s5", "p1"}, // new sandbox for a pod
	{"del", "s0", "p0"},
	{"rmns", "s2", "p2"},
	{"del", "s2", "p2"},    // DEL after the netns is gone
	{"del", "never", "p3"}, // DEL of a container that never existed
	{"add", "s6", "p0"},    // sandbox re-creation
	{"add", "s7", "p5"},
	{"del", "s3", "p3"},
}

// runScript plays the script through the chain in mode and returns the IPAM
// state it leaves, keyed by handle with pool offsets instead of addresses.
func runScript(t *testing.T, env *testbed.Env, mode testbed.IPAM) map[string][]int {
	ctx := context.Background()
	conflist := env.Conflist(mode)
	pods := map[string]bool{}
	sandboxes := map[string]*testbed.Sandbox{}
	for i, s := range script {
		if !pods[s.pod] {
			env.CreatePod(s.pod)
			pods[s.pod] = true
		}
		sb, ok := sandboxes[s.sb]
		if !ok {
			pod, err := env.Kube.CoreV1().Pods(env.Namespace).Get(ctx, s.pod, getOpts)
			if err != nil {
				t.Fatal(err)
			}
			sb = env.NewSandbox(pod, conflist)
			sum := sha256.Sum256([]byte(t.Name() + "/" + s.sb))
			sb.ContainerID = hex.EncodeToString(sum[:])
			sandboxes[s.sb] = sb
		}
		var err error
		switch s.op {
		case "add":
			err = sb.Add(ctx)
		case "del":
			err = sb.Del(ctx)
		case "rmns":
			sb.RemoveNetNS()
		}
		if err != nil {
			t.Fatalf("%s step %d (%s %s): %v", mode, i, s.op, s.sb, err)
		}
	}
	st, err := env.IPAMState(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Check(); err != nil {
		t.Fatalf("%s: %v", mode, err)
	}
	out := map[string][]int{}
	for h, ips := range st.ByHandle {
		for _, ip := range ips {
			out[h] = append(out[h], offset(env.Pool, net.ParseIP(ip)))
		}
	}
	// Everything the script left must release cleanly: nothing leaks.
	for _, sb := range sandboxes {
		if err := sb.Del(ctx); err != nil {
			t.Fatalf("%s: final DEL of %s: %v", mode, sb.ContainerID[:12], err)
		}
	}
	if st, err := env.IPAMState(ctx); err != nil || st.Allocated() != 0 {
		t.Fatalf("%s: after deleting every sandbox, IPAM still holds %v (err %v)", mode, st.ByHandle, err)
	}
	return out
}

func offset(pool *net.IPNet, ip net.IP) int {
	a, b := pool.IP.To4(), ip.To4()
	return int(b[2]-a[2])<<8 | int(b[3]-a[3])
}

func TestScriptedSequenceMatchesPlainCalico(t *testing.T) {
	eachRelease(t, func(t *testing.T, ds testbed.Datastore, rel string) {
		plain := runScript(t, bed.NewEnv(t, ds, testbed.EnvOptions{CalicoRelease: rel}), testbed.PlainCalico)
		capo := runScript(t, bed.NewEnv(t, ds, testbed.EnvOptions{CalicoRelease: rel}), testbed.Capo)
		if len(plain) == 0 {
			t.Fatal("the script left no allocations; it proves nothing")
		}
		hs := slices.Sorted(maps.Keys(plain))
		if got := slices.Sorted(maps.Keys(capo)); !slices.Equal(hs, got) {
			t.Fatalf("handles differ:\nplain %v\ncapo  %v", hs, got)
		}
		for _, h := range hs {
			if fmt.Sprint(plain[h]) != fmt.Sprint(capo[h]) {
				t.Errorf("handle %s: plain holds pool offsets %v, capo %v", h, plain[h], capo[h])
			}
		}
	})
}
