package e2e

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/capo-net/capo/test/testbed"
)

var getOpts = metav1.GetOptions{}

func TestDelIsIdempotentAndSafe(t *testing.T) {
	eachDatastore(t, func(t *testing.T, ds testbed.Datastore) {
		ctx := context.Background()
		env := bed.NewEnv(t, ds, testbed.EnvOptions{})
		conflist := env.Conflist(testbed.Capo)

		t.Run("twice", func(t *testing.T) {
			sb := env.NewSandbox(env.CreatePod("twice"), conflist)
			if err := sb.Add(ctx); err != nil {
				t.Fatal(err)
			}
			for i := range 2 {
				if err := sb.Del(ctx); err != nil {
					t.Fatalf("DEL #%d: %v", i+1, err)
				}
			}
			if free, err := env.Free(ctx, sb.IPs[0]); err != nil || !free {
				t.Fatalf("%s free=%v err=%v", sb.IP(), free, err)
			}
		})
		t.Run("never existed", func(t *testing.T) {
			sb := env.NewSandbox(env.CreatePod("ghost"), conflist)
			if err := sb.Del(ctx); err != nil {
				t.Fatalf("DEL with the netns present: %v", err)
			}
			sb.RemoveNetNS()
			if err := sb.Del(ctx); err != nil {
				t.Fatalf("DEL with no netns: %v", err)
			}
		})
		t.Run("netns gone", func(t *testing.T) {
			sb := env.NewSandbox(env.CreatePod("reboot"), conflist)
			if err := sb.Add(ctx); err != nil {
				t.Fatal(err)
			}
			sb.RemoveNetNS()
			if err := sb.Del(ctx); err != nil {
				t.Fatalf("DEL after the netns is gone: %v", err)
			}
			if free, err := env.Free(ctx, sb.IPs[0]); err != nil || !free {
				t.Fatalf("%s free=%v err=%v", sb.IP(), free, err)
			}
		})
		st, err := env.IPAMState(ctx)
		if err != nil || st.Allocated() != 0 {
			t.Fatalf("leaked: %v (err %v)", st.ByHandle, err)
		}
	})
}
