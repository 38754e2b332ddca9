package robust

import "testing"

// A process's exit is counted by the last warning or error it logged, the
// error's text left out, so that the figures group exits by cause.
func TestExitCause(t *testing.T) {
	for _, c := range []struct{ log, want string }{
		{`{"level":"INFO","msg":"serving"}
{"level":"ERROR","msg":"release pass failed; retrying next period","err":"x"}
{"level":"WARN","msg":"lost the lease; no longer writing","identity":"c1"}
`, "lost the lease; no longer writing"},
		{`{"level":"ERROR","msg":"startup","err":"deciding Calico's API group: listing the API server's groups: 503"}`, "startup: deciding Calico's API group"},
		{`{"level":"WARN","msg":"failpoint fired","failpoint":"agent/offer"}
capo failpoint agent/offer: exit 86
`, "failpoint fired"},
		{"{\"level\":\"INFO\",\"msg\":\"serving\"}\npanic: runtime error: index out of range\n\ngoroutine 1 [running]:\n", "panic: runtime error: index out of range"},
		{`{"level":"INFO","msg":"serving"}`, "nothing logged at warning or error level"},
		{"", "nothing logged at warning or error level"},
	} {
		if got := exitCause(c.log); got != c.want {
			t.Errorf("exitCause(%q) = %q, want %q", c.log, got, c.want)
		}
	}
}
