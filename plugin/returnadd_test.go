package plugin

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/capo-net/capo/pkg/wire"
)

// addrDelegate answers an ADD for a requested address with it, unless
// refused names it; a plain ADD gets fresh.
type addrDelegate struct {
	calls   []string
	refused map[string]bool
	fresh   string
	delErr  error // for another sandbox's DEL
}

func (d *addrDelegate) Invoke(_ context.Context, cmd string, _ *NetConf) ([]byte, error) {
	d.calls = append(d.calls, cmd)
	if cmd == "ADD" {
		return result(d.fresh), nil
	}
	return nil, nil
}

func (d *addrDelegate) Request(_ context.Context, _ *NetConf, args, ip string) ([]byte, error) {
	d.calls = append(d.calls, "ADD "+ip)
	if !strings.Contains(args, "K8S_POD_NAME=redis-3") {
		return nil, fmt.Errorf("CNI_ARGS lost: %q", args)
	}
	if d.refused[ip] {
		return nil, errors.New("Address already assigned in block")
	}
	return result(ip), nil
}

func (d *addrDelegate) ReleaseSandbox(_ context.Context, _ *NetConf, containerID string) error {
	d.calls = append(d.calls, "DEL "+containerID)
	return d.delErr
}

func result(ip string) []byte {
	bits := "32"
	if strings.Contains(ip, ":") {
		bits = "128"
	}
	return []byte(`{"cniVersion":"0.3.1","ips":[{"version":"` + map[string]string{"32": "4", "128": "6"}[bits] + `","address":"` + ip + `/` + bits + `"}],"dns":{}}`)
}

type fakeReporter struct{ got []wire.ReturnOutcome }

func (r *fakeReporter) ReportReturn(_ context.Context, o *wire.ReturnOutcome) error {
	r.got = append(r.got, *o)
	return nil
}

func TestReturnAdd(t *testing.T) {
	const dual = `{"cniVersion":"0.3.1","name":"net1","ipam":{"type":"capo-ipam","delegate":{"type":"calico-ipam","assign_ipv6":"true"}}}`
	cases := []struct {
		name      string
		conf      string
		offer     []string
		refused   string
		wantIPs   string
		wantCalls string
		outcome   string // "" = nothing reported
	}{
		{"nothing offered", testConf, nil, "", "10.0.0.50", "ADD", ""},
		{"one family", testConf, []string{"10.0.0.3"}, "", "10.0.0.3", "ADD 10.0.0.3", wire.Returned},
		{"dual stack", dual, []string{"10.0.0.3", "fd00::3"}, "", "10.0.0.3,fd00::3", "ADD 10.0.0.3|ADD fd00::3", wire.Returned},
		{"refused", testConf, []string{"10.0.0.3"}, "10.0.0.3", "10.0.0.50", "ADD 10.0.0.3|ADD", wire.FellBack},
		// IPv4 came back, IPv6 not: the IPv4 is released, both are fresh.
		{"one family of two refused", dual, []string{"10.0.0.3", "fd00::3"}, "fd00::3", "10.0.0.50", "ADD 10.0.0.3|ADD fd00::3|DEL|ADD", wire.FellBack},
		// Held for IPv4 only, the pod now dual stack: nothing is requested.
		{"fewer families than the pod's", dual, []string{"10.0.0.3"}, "", "10.0.0.50", "ADD", wire.FellBack},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := &addrDelegate{refused: map[string]bool{tc.refused: true}, fresh: "10.0.0.50"}
			rep := &fakeReporter{}
			var ret *wire.Return
			if tc.offer != nil {
				ret = &wire.Return{IPs: tc.offer}
			}
			pod := wire.PodRef{Namespace: "ns", Name: "redis-3"}
			sb := wire.Sandbox{Network: "net1", ContainerID: "c1", IfName: "eth0"}
			rt := returning{offer: ret, pod: pod, podName: "ns/redis-3", sandbox: sb, args: "K8S_POD_NAMESPACE=ns;K8S_POD_NAME=redis-3", rep: rep}
			out, err := returnAdd(context.Background(), mustConf(t, tc.conf), d, rt)
			if err != nil {
				t.Fatal(err)
			}
			ips, err := resultIPs(out)
			if err != nil || strings.Join(ips, ",") != tc.wantIPs {
				t.Fatalf("result %s (%v), want %s", out, err, tc.wantIPs)
			}
			if got := strings.Join(d.calls, "|"); got != tc.wantCalls {
				t.Errorf("delegate calls %s, want %s", got, tc.wantCalls)
			}
			switch {
			case tc.outcome == "" && len(rep.got) != 0:
				t.Errorf("reported %+v", rep.got)
			case tc.outcome != "" && (len(rep.got) != 1 || rep.got[0].Outcome != tc.outcome):
				t.Errorf("reported %+v, want %s", rep.got, tc.outcome)
			case tc.outcome != "" && rep.got[0].Sandbox != sb:
				t.Errorf("reported sandbox %+v, want %+v: the agent confirms the return on it", rep.got[0].Sandbox, sb)
			case tc.outcome == wire.FellBack && !strings.Contains(rep.got[0].Why, "already assigned") && !strings.Contains(rep.got[0].Why, "is given IPv4 and IPv6"):
				t.Errorf("why %q does not carry calico-ipam's answer", rep.got[0].Why)
			}
		})
	}
}

// slowDelegate's requested address never comes (calico-ipam stuck behind
// the host's IPAM lock); its plain ADD notes how much time it was left.
type slowDelegate struct {
	addrDelegate
	left time.Duration
}

func (d *slowDelegate) Invoke(ctx context.Context, cmd string, conf *NetConf) ([]byte, error) {
	if cmd == "ADD" {
		dl, _ := ctx.Deadline()
		d.left = time.Until(dl)
	}
	return d.addrDelegate.Invoke(ctx, cmd, conf)
}

func (d *slowDelegate) Request(ctx context.Context, _ *NetConf, _, ip string) ([]byte, error) {
	d.calls = append(d.calls, "ADD "+ip)
	<-ctx.Done()
	return nil, ctx.Err()
}

// A return stuck in calico-ipam gets its own share of the ADD's deadline:
// the ordinary ADD after it keeps most of the time a plain ADD would have,
// and whatever the cut-off request may have assigned is released first.
func TestReturnAttemptHasItsOwnShare(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	d := &slowDelegate{addrDelegate: addrDelegate{fresh: "10.0.0.50"}}
	rt := returning{offer: &wire.Return{IPs: []string{"10.0.0.3"}}, podName: "ns/redis-3", rep: &fakeReporter{}}
	out, err := returnAdd(ctx, mustConf(t, testConf), d, rt)
	if err != nil {
		t.Fatalf("the ADD failed where a plain ADD would have started the pod: %v", err)
	}
	if ips, _ := resultIPs(out); strings.Join(ips, ",") != "10.0.0.50" {
		t.Fatalf("result %s, want the fresh address", out)
	}
	if d.left < time.Second {
		t.Errorf("the ordinary ADD was left %v of 2s", d.left)
	}
	if got := strings.Join(d.calls, "|"); got != "ADD 10.0.0.3|DEL|ADD" {
		t.Errorf("delegate calls %s, want the cut-off request undone before the ADD", got)
	}
}
