package plugin

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/capo-net/capo/pkg/journal"
	"github.com/capo-net/capo/pkg/wire"
)

// slowAgent is unreachable for its first `away` asks.
type slowAgent struct {
	away, asked int
	network     string // the last request's
}

func (a *slowAgent) IPAMAnnotationsFor(_ context.Context, req *wire.AnnotationsRequest) (*wire.AnnotationsResponse, error) {
	a.asked++
	a.network = req.Network
	if a.asked <= a.away {
		return nil, errors.New("dial unix /var/run/capo/agent.sock: connect: no such file or directory")
	}
	return &wire.AnnotationsResponse{Return: &wire.Return{IPs: []string{"10.0.0.3"}}}, nil
}

type countingFallback struct{ asked int }

func (f *countingFallback) Get(context.Context, wire.PodRef) (*wire.AnnotationsResponse, error) {
	f.asked++
	return &wire.AnnotationsResponse{}, nil
}

// An ADD waits for an agent that is away only when its pod's own teardown
// waits in the journal, and no longer than its share of the deadline.
func TestAddWaitsForTheAgentOnlyForItsOwnJournaledTeardown(t *testing.T) {
	pod := wire.PodRef{Namespace: "db", Name: "redis-3", UID: "u2"}
	for _, tc := range []struct {
		name     string
		awaited  bool
		away     int
		deadline time.Duration
		wantIPs  bool // the agent's offer, not the API server's answer
		asked    int
	}{
		{"no teardown journaled: the API server at once", false, 3, 40 * time.Second, false, 1},
		{"its teardown journaled: the agent once up", true, 3, 40 * time.Second, true, 4},
		{"its teardown journaled, the agent never up: the API server after a quarter of the deadline", true, 1 << 30, 400 * time.Millisecond, false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			agent, fb := &slowAgent{away: tc.away}, &countingFallback{}
			a := agentAnnotations{
				agent: agent, network: "k8s-pod-network", timeout: time.Second, fallback: fb, retry: 10 * time.Millisecond,
				awaited: func(p wire.PodRef) bool { return tc.awaited && p == pod },
			}
			ctx, cancel := context.WithTimeout(context.Background(), tc.deadline)
			defer cancel()
			start := time.Now()
			resp, err := a.Get(ctx, pod)
			took := time.Since(start)
			if err != nil {
				t.Fatal(err)
			}
			if got := resp.Return != nil; got != tc.wantIPs {
				t.Fatalf("got the agent's offer: %v, want %v (asked the agent %d times, the API server %d)", got, tc.wantIPs, agent.asked, fb.asked)
			}
			if tc.wantIPs && agent.network != "k8s-pod-network" {
				t.Fatalf("the agent was told network %q: it checks a predecessor's handle against it", agent.network)
			}
			if tc.asked > 0 && agent.asked != tc.asked {
				t.Fatalf("asked the agent %d times, want %d", agent.asked, tc.asked)
			}
			if !tc.awaited && took > 100*time.Millisecond {
				t.Fatalf("an ADD with nothing journaled waited %s", took)
			}
			if tc.awaited && !tc.wantIPs && (took < 90*time.Millisecond || took > 300*time.Millisecond) {
				t.Fatalf("waited %s for an agent that never came, want about a quarter of %s", took, tc.deadline)
			}
		})
	}
}

// Only a journaled teardown of the same pod (namespace and name, any UID)
// that the agent selected at ADD is awaited.
func TestTeardownAwaited(t *testing.T) {
	j := journal.Dir{Root: t.TempDir()}
	write := func(id, name string, selected *bool) {
		req := wire.ReserveRequest{ContainerID: id, IfName: "eth0", Network: "k8s-pod-network", Pod: wire.PodRef{Namespace: "db", Name: name, UID: "old"}}
		if selected != nil {
			req.AtAdd = &wire.Decision{Selected: *selected}
		}
		if _, err := j.Write(&journal.Record{Request: req}); err != nil {
			t.Fatal(err)
		}
	}
	yes, no := true, false
	awaited := teardownAwaited(j)
	if awaited(wire.PodRef{Namespace: "db", Name: "redis-0"}) {
		t.Fatal("awaited with an empty journal")
	}
	write("c1", "redis-0", &yes)
	write("c2", "web-0", &no)
	write("c3", "cache-0", nil)
	for _, tc := range []struct {
		pod  wire.PodRef
		want bool
	}{
		{wire.PodRef{Namespace: "db", Name: "redis-0", UID: "new"}, true},
		{wire.PodRef{Namespace: "other", Name: "redis-0", UID: "new"}, false},
		{wire.PodRef{Namespace: "db", Name: "redis-1"}, false},
		{wire.PodRef{Namespace: "db", Name: "web-0"}, false},   // not selected at ADD
		{wire.PodRef{Namespace: "db", Name: "cache-0"}, false}, // no decision recorded
	} {
		if got := awaited(tc.pod); got != tc.want {
			t.Errorf("%+v awaited: %v, want %v", tc.pod, got, tc.want)
		}
	}
}
