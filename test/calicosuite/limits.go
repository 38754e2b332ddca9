package calicosuite

import (
	"fmt"
	"sort"
	"strings"
)

// Limits are the specs of Calico's suite that pass with plain calico-ipam
// and cannot pass with capo-ipam in front, each with why. Keep it short:
// anything else that passes plain and fails with capo is a capo bug.
// A spec is named by the start of its full ginkgo text.
var Limits = map[string]string{
	"Kubernetes CNI tests using ipAddrsNoIpam annotation to assign IP address to a pod, bypassing IPAM should successfully assigns the annotated IP address": "" +
		"the calico plugin honours cni.projectcalico.org/ipAddrsNoIpam only when the ipam type is calico-ipam, and refuses the pod under any other (cni-plugin/pkg/k8s/k8s.go); docs/return-address.md says how capo treats fixed addresses",
	"Kubernetes CNI tests using ipAddrs annotation to assign IP address to a pod from IPAM should successfully assign the annotated IP address": "" +
		"the calico plugin honours cni.projectcalico.org/ipAddrs only when the ipam type is calico-ipam, and refuses the pod under any other (cni-plugin/pkg/k8s/k8s.go); docs/return-address.md says how capo treats fixed addresses",
}

// limitOf is the documented reason spec may fail with capo, or "".
func limitOf(spec string, limits map[string]string) string {
	for name, why := range limits {
		if strings.HasPrefix(spec, name) {
			return why
		}
	}
	return ""
}

// Finding is one spec whose result differs between plain and capo.
type Finding struct {
	Datastore, Spec, Got, Why string
}

func (f Finding) String() string {
	s := fmt.Sprintf("[%s] %q: passes with plain calico-ipam, %s with capo-ipam", f.Datastore, f.Spec, f.Got)
	if f.Why != "" {
		s += " (" + f.Why + ")"
	}
	return s
}

// Findings sorts the specs that pass plain and not with capo: a
// regression fails with capo, and again when run on its own; a limit is
// one Limits explains; a flake failed with capo and passed on its own.
type Findings struct {
	Regressions, Limited, Flaky []Finding
}

// Compare finds, on each datastore, the specs that pass with plain
// calico-ipam and not with capo-ipam in front. A spec missing from the
// capo run counts as not passed.
func Compare(runs []Run, limits map[string]string) Findings {
	var out Findings
	for _, r := range runs {
		if r.IPAM != PlainIPAM {
			continue
		}
		capo := capoRun(runs, r.Datastore)
		for _, s := range r.Specs {
			if s.State != Passed {
				continue
			}
			f, failed := capo.against(s.Name)
			switch {
			case !failed:
			case limitOf(s.Name, limits) != "":
				f.Why = "documented limit: " + limitOf(s.Name, limits)
				out.Limited = append(out.Limited, f)
			case stateIn(capo.Retry, s.Name) == Passed:
				f.Why = "passed when run again on its own: a flake under load, not counted"
				out.Flaky = append(out.Flaky, f)
			default:
				out.Regressions = append(out.Regressions, f)
			}
		}
	}
	sort.Slice(out.Regressions, func(i, j int) bool { return out.Regressions[i].String() < out.Regressions[j].String() })
	return out
}

// capoRun is the capo run on ds; an empty one (every spec missing) if
// there is none.
func capoRun(runs []Run, ds string) Run {
	for _, r := range runs {
		if r.Datastore == ds && r.IPAM == CapoIPAM {
			return r
		}
	}
	return Run{Datastore: ds, IPAM: CapoIPAM}
}

// against says how the spec named name ended in r, if not passed.
func (r Run) against(name string) (Finding, bool) {
	f := Finding{Datastore: r.Datastore, Spec: name, Got: "missing"}
	for _, s := range r.Specs {
		if s.Name == name {
			if s.State == Passed {
				return f, false
			}
			f.Got = s.State + ": " + s.Message
		}
	}
	return f, true
}

func stateIn(specs []Spec, name string) string {
	for _, s := range specs {
		if s.Name == name {
			return s.State
		}
	}
	return ""
}
