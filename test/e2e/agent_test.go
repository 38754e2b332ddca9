package e2e

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/capo-net/capo/pkg/wire"
	"github.com/capo-net/capo/test/testbed"
)

// A valid request must still be answered promptly after each kind of abuse.
func assertAgentAnswers(t *testing.T, env *testbed.Env) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	resp, err := wire.NewClient(env.AgentSocket()).Reserve(ctx, &wire.ReserveRequest{
		ContainerID: "probe", IfName: "eth0", Network: testbed.NetworkName, Pod: wire.PodRef{Namespace: env.Namespace, Name: "nobody"},
	})
	if err != nil {
		t.Fatalf("agent stopped answering: %v", err)
	}
	if resp.Outcome != wire.NothingToReserve {
		t.Fatalf("probe outcome %q", resp.Outcome)
	}
}

func TestHostileSocketInput(t *testing.T) {
	env := bed.NewEnv(t, testbed.Kubernetes, testbed.EnvOptions{OptIn: true})
	dial := func() net.Conn {
		c, err := net.Dial("unix", env.AgentSocket())
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	post := func(body []byte) *http.Response {
		c := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", env.AgentSocket())
		}}, Timeout: 5 * time.Second}
		resp, err := c.Post("http://agent"+wire.ReservePath, "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}

	t.Run("garbage bytes", func(t *testing.T) {
		c := dial()
		_, _ = c.Write([]byte("\x00\xff\x13 not http at all\r\n\r\n"))
		c.Close()
		assertAgentAnswers(t, env)
	})
	t.Run("not JSON", func(t *testing.T) {
		if r := post([]byte("{{{{")); r.StatusCode != http.StatusBadRequest {
			t.Fatalf("status %d", r.StatusCode)
		}
		assertAgentAnswers(t, env)
	})
	t.Run("missing fields", func(t *testing.T) {
		if r := post([]byte(`{"pod":{"name":"x"}}`)); r.StatusCode != http.StatusBadRequest {
			t.Fatalf("status %d", r.StatusCode)
		}
	})
	t.Run("oversized body", func(t *testing.T) {
		big := `{"containerID":"` + strings.Repeat("a", 4<<20) + `","network":"n"}`
		if r := post([]byte(big)); r.StatusCode != http.StatusBadRequest {
			t.Fatalf("status %d for a 4 MiB body", r.StatusCode)
		}
		assertAgentAnswers(t, env)
	})
	t.Run("slow clients", func(t *testing.T) {
		// Many connections that send half a request and stall.
		var conns []net.Conn
		for range 50 {
			c := dial()
			_, _ = c.Write([]byte("POST " + wire.ReservePath + " HTTP/1.1\r\nHost: a\r\nContent-Length: 1000\r\n\r\n{"))
			conns = append(conns, c)
		}
		defer func() {
			for _, c := range conns {
				c.Close()
			}
		}()
		assertAgentAnswers(t, env)
		// The agent drops them at its read deadline rather than holding them.
		// It may first answer 408 or 400; after that the connection is closed.
		buf := make([]byte, 4096)
		_ = conns[0].SetReadDeadline(time.Now().Add(15 * time.Second))
		for {
			if _, err := conns[0].Read(buf); err != nil {
				if ne, ok := err.(net.Error); ok && ne.Timeout() {
					t.Fatal("a stalled connection is still open 15s later; the agent's read deadline is 5s")
				}
				break
			}
		}
	})
}

func TestConfigReloadWithoutRestart(t *testing.T) {
	env := bed.NewEnv(t, testbed.Etcd, testbed.EnvOptions{OptIn: true})
	ctx := context.Background()
	conflist := env.Conflist(testbed.Capo)
	zkLabels := testbed.WithLabels(map[string]string{"app": "zookeeper"})

	// Defaults: a zookeeper pod without StatefulSet labels is not selected.
	sb := env.AddPods("zk-a", 1, conflist, zkLabels)[0]
	if err := sb.Del(ctx); err != nil {
		t.Fatal(err)
	}
	if len(env.Reservations()) != 0 {
		t.Fatal("selected under the defaults")
	}
	env.SetConfig("apiVersion: config.capo.io/v1\nkind: CapoConfig\nlabelSelector:\n  matchLabels: {app: zookeeper}\n")
	env.Agent.WaitMetric(1, "capo_agent_config_reloads_total", `result="success"`)
	sb = env.AddPods("zk-b", 1, conflist, zkLabels)[0]
	if err := sb.Del(ctx); err != nil {
		t.Fatal(err)
	}
	if _, ok := env.Reservations()[sb.IP()]; !ok {
		t.Fatal("the reloaded selector was not applied")
	}
	// An invalid config is counted and the last good one stays.
	env.SetConfig("apiVersion: config.capo.io/v1\nkind: CapoConfig\nipReserveTime: soon\n")
	env.Agent.WaitMetric(1, "capo_agent_config_reloads_total", `result="error"`)
	sb = env.AddPods("zk-c", 1, conflist, zkLabels)[0]
	if err := sb.Del(ctx); err != nil {
		t.Fatal(err)
	}
	if _, ok := env.Reservations()[sb.IP()]; !ok {
		t.Fatal("an invalid config displaced the last good one")
	}
}
