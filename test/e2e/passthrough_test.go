package e2e

import (
	"context"
	"testing"

	"github.com/capo-net/capo/test/testbed"
)

func TestAddGivesWorkingInterfaceAndDelReleases(t *testing.T) {
	eachDatastore(t, func(t *testing.T, ds testbed.Datastore) {
		ctx := context.Background()
		env := bed.NewEnv(t, ds, testbed.EnvOptions{})
		pod := env.CreatePod("web-0")
		sb := env.NewSandbox(pod, env.Conflist(testbed.Capo))
		if err := sb.Add(ctx); err != nil {
			t.Fatalf("ADD through calico -> capo-ipam -> calico-ipam: %v", err)
		}
		if len(sb.IPs) != 1 || !env.Pool.Contains(sb.IPs[0]) {
			t.Fatalf("pod got %v, want one address from %s", sb.IPs, env.Pool)
		}
		if err := sb.VerifyDataplane(); err != nil {
			t.Fatal(err)
		}
		st, err := env.IPAMState(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if got := st.ByHandle[sb.Handle()]; len(got) != 1 || got[0] != sb.IP() {
			t.Fatalf("handle %s holds %v, want [%s]", sb.Handle(), got, sb.IP())
		}
		if err := sb.Del(ctx); err != nil {
			t.Fatalf("DEL: %v", err)
		}
		if free, err := env.Free(ctx, sb.IPs[0]); err != nil || !free {
			t.Fatalf("after DEL %s free=%v err=%v", sb.IP(), free, err)
		}
	})
}
