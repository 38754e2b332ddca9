package e2e

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"

	"github.com/capo-net/capo/test/testbed"
)

// parityEnv is one side of the comparison: the default pool (.0/26) and two
// more, gold (.64/27) and silver (.128/27), all on the env's node.
type parityEnv struct {
	env          *testbed.Env
	mode         testbed.IPAM
	gold, silver *net.IPNet
}

func newParityEnv(t *testing.T, ds testbed.Datastore, rel string, mode testbed.IPAM) *parityEnv {
	env := bed.NewEnv(t, ds, testbed.EnvOptions{CalicoRelease: rel})
	return &parityEnv{
		env: env, mode: mode,
		gold:   env.AddPool("gold-"+env.ID, 64, 27),
		silver: env.AddPool("silver-"+env.ID, 128, 27),
	}
}

// add runs one pod through the chain and says which pool its address is in.
func (p *parityEnv) add(t *testing.T, name string, ann map[string]string) (string, error) {
	sb := p.env.NewSandbox(p.env.CreatePod(name, testbed.WithAnnotations(ann)), p.env.Conflist(p.mode))
	if err := sb.Add(context.Background()); err != nil {
		return "", err
	}
	ip := sb.IPs[0]
	switch {
	case p.gold.Contains(ip):
		return "gold", nil
	case p.silver.Contains(ip):
		return "silver", nil
	case p.env.Pool.Contains(ip):
		return "default", nil
	}
	return "", fmt.Errorf("address %s in no known pool", ip)
}

// Under capo-ipam the pool and family annotations land where they land
// under calico-ipam, and malformed ones fail the ADD as they do there.
func TestCalicoPoolAnnotationsKeepWorking(t *testing.T) {
	eachRelease(t, func(t *testing.T, ds testbed.Datastore, rel string) {
		plain := newParityEnv(t, ds, rel, testbed.PlainCalico)
		capo := newParityEnv(t, ds, rel, testbed.Capo)
		for _, side := range []*parityEnv{plain, capo} {
			side.env.AnnotateNamespace(map[string]string{"cni.projectcalico.org/ipv4pools": fmt.Sprintf(`["silver-%s"]`, side.env.ID)})
		}
		cases := []struct {
			name string
			ann  func(p *parityEnv) map[string]string
			want string // pool, or an error fragment for both
		}{
			{"namespace default", func(*parityEnv) map[string]string { return nil }, "silver"},
			{"pod pool by name", func(p *parityEnv) map[string]string {
				return map[string]string{"cni.projectcalico.org/ipv4pools": fmt.Sprintf(`["gold-%s"]`, p.env.ID)}
			}, "gold"},
			{"pod pool by CIDR", func(p *parityEnv) map[string]string {
				return map[string]string{"cni.projectcalico.org/ipv4pools": fmt.Sprintf(`["%s"]`, p.gold)}
			}, "gold"},
			{"pod overrides to the default pool", func(p *parityEnv) map[string]string {
				return map[string]string{"cni.projectcalico.org/ipv4pools": fmt.Sprintf(`["pool-%s"]`, p.env.ID)}
			}, "default"},
			{"families IPv4", func(*parityEnv) map[string]string {
				return map[string]string{"cni.projectcalico.org/ipFamilies": `["IPv4"]`}
			}, "silver"},
			{"malformed pools", func(*parityEnv) map[string]string {
				return map[string]string{"cni.projectcalico.org/ipv4pools": `gold`}
			}, "error:"},
			{"unknown family", func(*parityEnv) map[string]string {
				return map[string]string{"cni.projectcalico.org/ipFamilies": `["IPv5"]`}
			}, "error:"},
		}
		for i, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				pod := fmt.Sprintf("p-%d", i)
				got := map[testbed.IPAM]string{}
				for _, side := range []*parityEnv{plain, capo} {
					pool, err := side.add(t, pod, tc.ann(side))
					if err != nil {
						pool = "error: " + err.Error()
					}
					got[side.mode] = pool
				}
				if !strings.HasPrefix(got[testbed.PlainCalico], tc.want) {
					t.Fatalf("control: plain calico-ipam gave %q, want %q", got[testbed.PlainCalico], tc.want)
				}
				if !strings.HasPrefix(got[testbed.Capo], tc.want) {
					t.Fatalf("capo gave %q, plain calico-ipam %q", got[testbed.Capo], got[testbed.PlainCalico])
				}
				if strings.HasPrefix(tc.want, "error") && !strings.Contains(got[testbed.Capo], "cni.projectcalico.org/") {
					t.Fatalf("capo's error does not name the annotation: %s", got[testbed.Capo])
				}
			})
		}
		// capo-ipam asks the agent first; with the agent down it reads the
		// API server with Calico's own kubeconfig, and the ADD still works.
		t.Run("agent down", func(t *testing.T) {
			capo.env.Agent.Stop()
			pool, err := capo.add(t, "p-agent-down", map[string]string{"cni.projectcalico.org/ipv4pools": fmt.Sprintf(`["gold-%s"]`, capo.env.ID)})
			if err != nil || pool != "gold" {
				t.Fatalf("pool %q err %v", pool, err)
			}
			if !strings.Contains(capo.env.CapoIPAMLog(), "reading the API server") {
				t.Fatal("the fallback was not taken")
			}
		})
	})
}
