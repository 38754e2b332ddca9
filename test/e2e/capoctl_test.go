package e2e

import (
	"context"
	"encoding/json"
	"os/exec"
	"strings"
	"testing"

	"github.com/capo-net/capo/test/testbed"
)

// capoctl runs the CLI as an operator would, against the env's datastore.
func capoctl(t *testing.T, env *testbed.Env, stdin string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(bed.Bin.Capoctl, append(args, "--capo-namespace="+env.Namespace)...)
	cmd.Env = append([]string{"PATH=/usr/bin:/bin", "HOME=/nonexistent"}, bed.CalicoEnv(env.DS)...)
	cmd.Stdin = strings.NewReader(stdin)
	out, _ := cmd.CombinedOutput()
	return string(out), cmd.ProcessState.ExitCode()
}

func TestCapoctl(t *testing.T) {
	eachDatastore(t, func(t *testing.T, ds testbed.Datastore) {
		ctx := context.Background()
		env := bed.NewEnv(t, ds, testbed.EnvOptions{OptIn: true})
		env.SetConfig(configWith("ipReserveTime: 2h\n"))
		conflist := env.Conflist(testbed.Capo)
		sbs := env.AddPods("redis", 3, conflist, testbed.StatefulPod("redis"))
		web := env.AddPods("web", 1, conflist, testbed.WithLabels(map[string]string{"app": "web"}))[0]
		for _, sb := range sbs {
			env.Evict(sb.Pod.Name)
			if err := sb.Del(ctx); err != nil {
				t.Fatal(err)
			}
		}

		out, code := capoctl(t, env, "", "list")
		if code != 0 || !strings.Contains(out, "EXPIRES IN") || strings.Count(out, env.Node) != 3 || !strings.Contains(out, env.Namespace+"/redis-1") || !strings.Contains(out, "2h0m") && !strings.Contains(out, "1h59m") { // not seen by a controller yet: a whole TTL ahead
			t.Fatalf("list: exit %d\n%s", code, out)
		}
		out, code = capoctl(t, env, "", "list", "--pod", env.Namespace+"/redis-2", "-o", "json")
		var rows []map[string]any
		if code != 0 || json.Unmarshal([]byte(out), &rows) != nil || len(rows) != 1 || rows[0]["ip"] != sbs[2].IP() || rows[0]["ownerKind"] != "StatefulSet" {
			t.Fatalf("list -o json --pod: exit %d\n%s", code, out)
		}
		if out, code = capoctl(t, env, "", "list", "-o", "yaml", "--node", "no-such-node"); code != 0 || strings.TrimSpace(out) != "[]" {
			t.Fatalf("list -o yaml for no node: %d %q", code, out)
		}

		// release asks first; "n" keeps everything.
		out, code = capoctl(t, env, "n\n", "release", sbs[0].IP())
		if code != 0 || !strings.Contains(out, "nothing released") || !held(env, sbs[0].IP()) {
			t.Fatalf("release answered no: %d\n%s", code, out)
		}
		out, code = capoctl(t, env, "y\n", "release", sbs[0].IP())
		if code != 0 || !strings.Contains(out, "released 1") || held(env, sbs[0].IP()) {
			t.Fatalf("release one: %d\n%s", code, out)
		}
		out, code = capoctl(t, env, "", "release", "--pod", env.Namespace+"/redis-1", "--yes")
		if code != 0 || held(env, sbs[1].IP()) || !held(env, sbs[2].IP()) {
			t.Fatalf("release --pod: %d\n%s", code, out)
		}
		if out, code = capoctl(t, env, "", "release", "10.99.99.99", "--yes"); code != 1 || !strings.Contains(out, "nothing held matches") {
			t.Fatalf("release of nothing: %d\n%s", code, out)
		}
		defer func() {
			// Last: a whole node's reservations, or (etcd) everything held.
			args := []string{"release", "--node", env.Node}
			if ds == testbed.Etcd {
				args = []string{"release", "--all"}
			}
			if out, code := capoctl(t, env, "yes\n", args...); code != 0 || len(env.Reservations()) != 0 {
				t.Fatalf("%v: %d\n%s", args, code, out)
			}
		}()

		// explain: the rule that decides, for a selected and a plain pod.
		out, code = capoctl(t, env, "", "explain", env.Namespace+"/redis-2")
		if code != 0 || !strings.Contains(out, "RESERVED on teardown") || !strings.Contains(out, "selector statefulset.kubernetes.io/pod-name exists") || !strings.Contains(out, "held now: "+sbs[2].IP()) {
			t.Fatalf("explain selected: %d\n%s", code, out)
		}
		out, code = capoctl(t, env, "", "explain", env.Namespace+"/"+web.Pod.Name)
		if code != 0 || !strings.Contains(out, "released on teardown") || !strings.Contains(out, "matches no configured pod selector") {
			t.Fatalf("explain plain: %d\n%s", code, out)
		}
		if out, code = capoctl(t, env, "", "release", "--all", "--node", env.Node); code != 1 || !strings.Contains(out, "give it alone") {
			t.Fatalf("release --all with a filter: %d\n%s", code, out)
		}
		if _, code = capoctl(t, env, "", "frobnicate"); code != 2 {
			t.Fatalf("unknown command exit %d", code)
		}
	})
}
