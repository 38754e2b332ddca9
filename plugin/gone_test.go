package plugin

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/capo-net/capo/pkg/journal"
	"github.com/capo-net/capo/pkg/wire"
)

func TestDecideGoneOnlyOnLastingEvidence(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	mark := &journal.AgentMark{Namespace: "capo-system", Pod: "capo-agent-x1", Node: "n1"}
	cases := map[string]struct {
		s           goneState
		gone, start bool
	}{
		"no agent ever named itself": {goneState{}, false, false},
		"the API cannot say":         {goneState{mark: mark, err: errors.New("timeout")}, false, false},
		"the agent's pod exists":     {goneState{mark: mark, exists: true, missing: now.Add(-time.Hour)}, false, false},
		"absent for the first time":  {goneState{mark: mark}, false, true},
		"absent for a minute":        {goneState{mark: mark, missing: now.Add(-time.Minute)}, false, false},
		"absent for the grace":       {goneState{mark: mark, missing: now.Add(-time.Hour)}, true, false},
		// A replacement agent pod that never starts: the node stays opted in.
		"absent for a day, the node opted in": {goneState{mark: mark, optedIn: true, missing: now.Add(-24 * time.Hour)}, false, false},
	}
	for name, tc := range cases {
		tc.s.now, tc.s.goneAfter = now, time.Hour
		gone, start, why := decideGone(tc.s)
		if gone != tc.gone || start != tc.start {
			t.Errorf("%s: gone %v start %v (%s), want gone %v start %v", name, gone, start, why, tc.gone, tc.start)
		}
	}
}

// helperSaying is a capo-ipam-kube that answers --agent-pod with body.
func helperSaying(t *testing.T, body string) []string {
	return []string{script(t, wire.KubeHelper, body)}
}

func TestGoneCheckNeedsTheAgentsPodAbsentForTheGrace(t *testing.T) {
	dir := t.TempDir()
	now := time.Now()
	g := goneCheck{stateDir: dir, kubeconfig: "/etc/cni/net.d/calico-kubeconfig", paths: helperSaying(t, `echo '{"exists":false,"optedIn":false}'`), now: func() time.Time { return now }}
	if gone, why := g.gone(context.Background()); gone {
		t.Fatalf("gone with no agent mark: %s", why)
	}
	if err := (journal.Dir{Root: dir}).WriteAgentMark(journal.AgentMark{Namespace: "capo-system", Pod: "capo-agent-x1", Node: "n1"}); err != nil {
		t.Fatal(err)
	}
	if gone, why := g.gone(context.Background()); gone {
		t.Fatalf("gone at the first absence: %s", why)
	}
	now = now.Add(61 * time.Minute)
	if gone, why := g.gone(context.Background()); !gone {
		t.Fatalf("not gone after an hour of absence: %s", why)
	}
	// Another agent came and went since: its absence starts afresh.
	if err := (journal.Dir{Root: dir}).WriteAgentMark(journal.AgentMark{Namespace: "capo-system", Pod: "capo-agent-y2", Node: "n1"}); err != nil {
		t.Fatal(err)
	}
	if gone, why := g.gone(context.Background()); gone {
		t.Fatalf("the earlier pod's absence counted for the later one: %s", why)
	}
}

func TestGoneCheckKeepsCapoWhenUnsure(t *testing.T) {
	dir := t.TempDir()
	if err := (journal.Dir{Root: dir}).WriteAgentMark(journal.AgentMark{Namespace: "capo-system", Pod: "capo-agent-x1", Node: "n1"}); err != nil {
		t.Fatal(err)
	}
	old := "capo-system/capo-agent-x1 " + time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
	if err := os.WriteFile(filepath.Join(dir, missingFile), []byte(old), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		paths []string
	}{
		{"the helper fails", helperSaying(t, "echo 'connection refused' >&2; exit 1")},
		{"the helper is wrong", helperSaying(t, "echo nonsense")},
		{"no helper", []string{t.TempDir()}},
		{"the node opted in", helperSaying(t, `echo '{"exists":false,"optedIn":true}'`)},
		{"no node answer", helperSaying(t, `echo '{"exists":false}'`)},
		{"the pod is back", helperSaying(t, `echo '{"exists":true,"optedIn":true}'`)}, // last: it clears the absence
	} {
		g := goneCheck{stateDir: dir, kubeconfig: "k", paths: tc.paths, now: time.Now}
		if gone, why := g.gone(context.Background()); gone {
			t.Errorf("%s: gone (%s)", tc.name, why)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, missingFile)); err == nil {
		t.Error("the absence record outlived the pod's return")
	}
}

// With the agent unreachable, a DEL is journaled while capo may exist,
// and released as plain calico-ipam once capo is known to be gone.
func TestDelReleasesPlainlyOnlyWhenCapoIsGone(t *testing.T) {
	for _, gone := range []bool{false, true} {
		d, j := &fakeDelegate{}, &fakeJournal{}
		deps := delDeps{
			agent: &fakeAgent{err: errors.New("dial unix /var/run/capo/agent.sock: connect: no such file")}, delegate: d, journal: j,
			gone: func(context.Context) (bool, string) { return gone, "test" },
		}
		if err := del(context.Background(), delArgs(), mustConf(t, delConf), deps); err != nil {
			t.Fatal(err)
		}
		released := len(d.calls) > 0 && d.calls[len(d.calls)-1] == "DEL"
		if released != gone || (len(j.records) == 1) == gone {
			t.Fatalf("capo gone %v: released %v, journaled %d", gone, released, len(j.records))
		}
	}
}

// A mark an older agent wrote names no node: whether the node is still
// opted in cannot be asked, and capo is kept however long its pod is gone.
func TestGoneCheckKeepsCapoForAMarkWithoutNode(t *testing.T) {
	dir := t.TempDir()
	if err := (journal.Dir{Root: dir}).WriteAgentMark(journal.AgentMark{Namespace: "capo-system", Pod: "capo-agent-x1"}); err != nil {
		t.Fatal(err)
	}
	old := "capo-system/capo-agent-x1 " + time.Now().Add(-24*time.Hour).UTC().Format(time.RFC3339)
	if err := os.WriteFile(filepath.Join(dir, missingFile), []byte(old), 0o644); err != nil {
		t.Fatal(err)
	}
	g := goneCheck{stateDir: dir, kubeconfig: "k", paths: helperSaying(t, `echo '{"exists":false,"optedIn":false}'`), now: time.Now}
	if gone, why := g.gone(context.Background()); gone || !strings.Contains(why, "names no node") {
		t.Fatalf("gone %v: %s", gone, why)
	}
}
