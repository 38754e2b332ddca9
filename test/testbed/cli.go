package testbed

import (
	"os/exec"
)

// Capoctl runs capoctl as an operator would against the env's datastore,
// with env added to its environment; it returns the output and exit code.
func (e *Env) Capoctl(env []string, args ...string) (string, int) {
	e.T.Helper()
	cmd := exec.Command(e.Bed.Bin.Capoctl, append(args, "--capo-namespace="+e.Namespace)...)
	cmd.Env = append(append([]string{"PATH=/usr/bin:/bin", "HOME=/nonexistent"}, e.Bed.CalicoEnv(e.DS)...), env...)
	out, _ := cmd.CombinedOutput()
	return string(out), cmd.ProcessState.ExitCode()
}

// InstallCheck runs capo-install check on the node's CNI dirs n, with the
// bed's admin credentials and env added.
func (e *Env) InstallCheck(n *NodeCNI, env ...string) (string, int) {
	e.T.Helper()
	cmd := exec.Command(e.Bed.Bin.CapoInstall, "check", "--cni-bin-dir="+n.BinDir, "--cni-conf-dir="+n.ConfDir, "--source="+e.Bed.Bin.CapoIPAM)
	cmd.Env = append(append([]string{"PATH=/usr/bin:/bin"}, e.Bed.CalicoEnv(e.DS)...), env...)
	out, _ := cmd.CombinedOutput()
	return string(out), cmd.ProcessState.ExitCode()
}
