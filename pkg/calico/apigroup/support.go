package apigroup

import (
	"encoding/json"
	"fmt"
)

// UnsupportedError is a mode this build cannot keep its promises in.
type UnsupportedError struct{ Mode Mode }

func (e *UnsupportedError) Error() string {
	return fmt.Sprintf("Calico keeps its resources in %s, which this capo build does not know: it reads and writes Calico's resources only in %s or %s, "+
		"so it refuses to run rather than let an address go to another pod; set %s to the group Calico uses",
		e.Mode, GroupV1, GroupV3, EnvGroup)
}

// supported is nil when this build can work in m: on etcdv3, in
// crd.projectcalico.org/v1 (libcalico-go's client) and in native
// projectcalico.org/v3, where every Calico resource capo reads or writes
// goes through capo's own client (pkg/calico/client).
func supported(m Mode) error {
	if m.Source != SourceEtcd && m.Group != GroupV1 && m.Group != GroupV3 {
		return &UnsupportedError{Mode: m}
	}
	return nil
}

// MismatchError is a node whose calico plugin is told another group than
// the one this process decided: calico-ipam there reads reservations only
// in its own group.
type MismatchError struct {
	Mode    Mode
	Netconf string
}

func (e *MismatchError) Error() string {
	return fmt.Sprintf("the calico plugin's calico_api_group on this node is %s, but this process uses %s: calico-ipam would not read what capo reserves; restart capo-agent (or align %s with the CNI config)",
		e.Netconf, e.Mode, EnvGroup)
}

// Agrees is nil unless group (the node's calico_api_group now, or the one
// a capo-ipam call uses) names a group other than m's: calico-ipam would
// not read what capo reserves in m. On etcdv3, or with no group, it passes.
func Agrees(m Mode, group string) error {
	if m.Source == SourceEtcd || group == "" {
		return nil
	}
	g, err := parseGroup(group)
	if err != nil {
		return fmt.Errorf("the calico plugin's calico_api_group in the CNI config: %w", err)
	}
	if g != m.Group {
		return &MismatchError{Mode: m, Netconf: g}
	}
	return nil
}

// InGroup is a journaled netconf (the calico plugin's config, as capo-ipam
// got it) told the group in force, for a DEL replayed later: a teardown
// journaled before Calico moved to projectcalico.org/v3 is released where
// calico-ipam now keeps its allocation, not in the locked v1 datastore.
// The agent is only ready while the node's calico_api_group and m agree,
// so m is the node's group now. On etcdv3, or unreadable input, netconf is
// returned as it is (its parser says what is wrong).
func InGroup(netconf []byte, m Mode) []byte {
	if m.Source == SourceEtcd || m.Group == "" {
		return netconf
	}
	var conf map[string]json.RawMessage
	if json.Unmarshal(netconf, &conf) != nil {
		return netconf
	}
	if was, ok := conf["calico_api_group"]; !ok && m.Source == SourceDiscovery {
		return netconf // calico-ipam decides as capo did
	} else if ok {
		var g string
		if json.Unmarshal(was, &g) == nil && g != "" {
			if pg, err := parseGroup(g); err == nil && pg == m.Group {
				return netconf
			}
		}
	}
	conf["calico_api_group"], _ = json.Marshal(m.Group)
	out, err := json.Marshal(conf)
	if err != nil {
		return netconf
	}
	return out
}
