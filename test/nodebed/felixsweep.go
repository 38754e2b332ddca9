package nodebed

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// felixSweptRoutes holds every address felix routes on the bed: the pods'
// (PodCIDR) and the tunnel addresses (TunnelPool), nothing else.
const felixSweptRoutes = "10.250.0.0/15"

// sweepFelix removes what felix leaves in the machine's network namespace
// when it exits: its process (a killed run's), its iptables rules and
// cali-* chains in every table, its cali* ipsets, the
// vxlan.calico device, its routes, and ip_forward as it was.
func sweepFelix(logf func(string, ...any)) error {
	killPids(felixPids(), "felix process", logf)
	var errs []error
	backend := iptablesBackend()
	for _, tool := range []string{"iptables-" + backend, "ip6tables-" + backend} {
		if _, err := exec.LookPath(tool + "-save"); err == nil {
			errs = append(errs, removeFelixRules(tool))
		}
	}
	errs = append(errs, destroyFelixIPSets())
	if exists("/sys/class/net/vxlan.calico") {
		errs = append(errs, run("ip", "link", "del", "vxlan.calico"))
	}
	errs = append(errs, run("ip", "route", "flush", "root", felixSweptRoutes))
	errs = append(errs, restoreIPForward())
	return errors.Join(errs...)
}

// iptablesBackend is the backend of the machine's iptables command, the
// one kube-proxy programs: felix is told to use it too (its own detection
// reads both and so loads the other backend's tables), and the sweep reads
// only it.
func iptablesBackend() string {
	out, _ := exec.Command("iptables", "--version").Output()
	if strings.Contains(string(out), "nf_tables") {
		return "nft"
	}
	return "legacy"
}

// felixPids are the bed's felixes (and the first's restart loop), known
// by the config file paths they were given.
func felixPids() []int {
	cfgs := []string{filepath.Join(Root, "felix", "felix.cfg"), filepath.Join(node2Dir, "felix", "felix.cfg")}
	return pidsWhere(func(args []string) bool { return slices.Contains(args, cfgs[0]) || slices.Contains(args, cfgs[1]) })
}

// removeFelixRules deletes felix's rules from the chains it does not own
// (the jumps into cali-* and its marked ACCEPTs, all commented "cali:"),
// then flushes and deletes every cali-* chain; nothing else is touched.
func removeFelixRules(tool string) error {
	out, err := exec.Command(tool + "-save").Output()
	if err != nil {
		return fmt.Errorf("%s-save: %w", tool, err)
	}
	table := ""
	var rules, chains [][]string
	for _, line := range strings.Split(string(out), "\n") {
		switch {
		case strings.HasPrefix(line, "*"):
			table = line[1:]
		case strings.HasPrefix(line, ":cali-"):
			chains = append(chains, []string{table, strings.Fields(line)[0][1:]})
		case strings.HasPrefix(line, "-A ") && !strings.HasPrefix(line, "-A cali-") &&
			(strings.Contains(line, "-j cali-") || strings.Contains(line, `"cali:`) || strings.Contains(line, " cali:")):
			args, err := splitRule(line)
			if err != nil {
				return fmt.Errorf("%s: %w", tool, err)
			}
			rules = append(rules, append([]string{"-t", table, "-D"}, args[1:]...))
		}
	}
	var errs []error
	for _, r := range rules {
		errs = append(errs, run(tool, r...))
	}
	for _, op := range []string{"-F", "-X"} {
		for _, c := range chains {
			errs = append(errs, run(tool, "-t", c[0], op, c[1]))
		}
	}
	return errors.Join(errs...)
}

// splitRule splits an iptables-save rule into arguments, undoing its
// double quotes (comments may hold spaces).
func splitRule(line string) ([]string, error) {
	var args []string
	var cur strings.Builder
	in, started := false, false
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case c == '\\' && in && i+1 < len(line):
			i++
			cur.WriteByte(line[i])
		case c == '"':
			in, started = !in, true
		case c == ' ' && !in:
			if started {
				args = append(args, cur.String())
				cur.Reset()
				started = false
			}
		default:
			cur.WriteByte(c)
			started = true
		}
	}
	if in {
		return nil, fmt.Errorf("unbalanced quotes in %q", line)
	}
	if started {
		args = append(args, cur.String())
	}
	return args, nil
}

// destroyFelixIPSets destroys felix's ipsets (cali40*, cali60*), once no
// rule refers to them.
func destroyFelixIPSets() error {
	if _, err := exec.LookPath("ipset"); err != nil {
		return nil
	}
	out, err := exec.Command("ipset", "list", "-n").Output()
	if err != nil {
		return fmt.Errorf("ipset list -n: %w", err)
	}
	var errs []error
	for _, name := range strings.Fields(string(out)) {
		if strings.HasPrefix(name, "cali40") || strings.HasPrefix(name, "cali60") {
			errs = append(errs, run("ipset", "destroy", name))
		}
	}
	return errors.Join(errs...)
}

const ipForward = "/proc/sys/net/ipv4/ip_forward"

// saveIPForward records ip_forward before felix turns it on, once per run
// (a restarted felix must not record its own setting).
func saveIPForward() error {
	saved := filepath.Join(Root, "ip_forward.saved")
	if exists(saved) {
		return nil
	}
	v, err := os.ReadFile(ipForward)
	if err != nil {
		return err
	}
	return os.WriteFile(saved, v, 0o644)
}

func restoreIPForward() error {
	v, err := os.ReadFile(filepath.Join(Root, "ip_forward.saved"))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	return os.WriteFile(ipForward, v, 0o644)
}

// FelixLeftovers lists what felix left in the machine's network namespace
// that the sweep should have removed; empty after a clean stop.
func FelixLeftovers() []string {
	var left []string
	if exists("/sys/class/net/vxlan.calico") {
		left = append(left, "the vxlan.calico device")
	}
	if out, err := exec.Command("ip", "route", "show", "root", felixSweptRoutes).Output(); err != nil || len(strings.TrimSpace(string(out))) > 0 {
		left = append(left, fmt.Sprintf("routes in %s: %q (%v)", felixSweptRoutes, out, err))
	}
	if out, err := exec.Command("iptables-" + iptablesBackend() + "-save").Output(); err != nil || strings.Contains(string(out), "cali") {
		left = append(left, fmt.Sprintf("felix's iptables rules or chains (%v)", err))
	}
	if out, err := exec.Command("ipset", "list", "-n").Output(); err == nil && strings.Contains(string(out), "cali") {
		left = append(left, "ipsets "+strings.Join(strings.Fields(string(out)), " "))
	}
	return left
}

func run(name string, args ...string) error {
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, out)
	}
	return nil
}
