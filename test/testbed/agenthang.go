package testbed

import "syscall"

// Hang stops the agent process (SIGSTOP), as a deadlock would: its socket
// still takes connections and nothing answers, and its pod stays Ready, as
// the kubelet reports it until the readiness probe has failed a few times
// (ReportNotReady). The agent resumes when the test ends.
func (a *Agent) Hang() {
	_ = syscall.Kill(-a.proc.cmd.Process.Pid, syscall.SIGSTOP)
	a.env.T.Cleanup(a.Resume) // before Stop, which the start registered
}

// Resume continues a hung agent (SIGCONT).
func (a *Agent) Resume() { _ = syscall.Kill(-a.proc.cmd.Process.Pid, syscall.SIGCONT) }

// ReportNotReady reports the agent pod NotReady, as the kubelet does once
// the readiness probe of a hung agent has failed its threshold.
func (a *Agent) ReportNotReady() {
	a.env.T.Helper()
	if err := a.env.setAgentPodReady(a.podNS, a.podName, false); err != nil {
		a.env.T.Fatal(err)
	}
}
