// Package apigroup decides which API group Calico keeps its resources in
// on the Kubernetes datastore, once per process and the way Calico itself
// decides, and checks that every resource type capo touches is served
// there. A type that is not served reads as an empty list or an absent
// object through libcalico-go v3.31, which would let capo free a held
// address silently: this package turns that into an error.
package apigroup

import (
	"context"
	"fmt"
	"slices"
	"strings"
)

// Calico's two homes for its resources on the Kubernetes datastore.
const (
	// GroupV1 is the crd.projectcalico.org/v1 CRDs libcalico-go has always
	// used (v3 labels and annotations kept in projectcalico.org/metadata).
	GroupV1 = "crd.projectcalico.org/v1"
	// GroupV3 is native projectcalico.org/v3 CRDs (Calico 3.32's tech
	// preview, the default of new installs after 3.32).
	GroupV3 = "projectcalico.org/v3"
)

// EnvGroup is the variable Calico's components read first.
const EnvGroup = "CALICO_API_GROUP"

// Where the group in force came from: the values of the source label.
const (
	SourceEnv       = "env"       // CALICO_API_GROUP
	SourceNetconf   = "netconf"   // the calico plugin's calico_api_group in the node's conflist
	SourceDiscovery = "discovery" // what the API server serves
	SourceEtcd      = "etcdv3"    // no API group: the etcdv3 datastore
)

// Mode is the API group in force and why.
type Mode struct {
	Group  string // GroupV1 or GroupV3; "" on etcdv3
	Source string
}

func (m Mode) String() string {
	if m.Source == SourceEtcd {
		return "etcdv3 datastore (no API group)"
	}
	return m.Group + " (from " + m.Source + ")"
}

// inputs are what decide looks at, in Calico's order.
type inputs struct {
	Etcd    bool                                        // DATASTORE_TYPE=etcdv3: there is no group to decide
	Env     string                                      // CALICO_API_GROUP as set, or ""
	Netconf string                                      // calico_api_group of the node's calico plugin, or "" (off the node: always "")
	Groups  func(ctx context.Context) ([]string, error) // the API group names the server serves
}

// decide picks the group as libcalico-go's Kubernetes backend does:
// CALICO_API_GROUP when set, else the netconf's calico_api_group, else v3
// when projectcalico.org is served and crd.projectcalico.org is not, else
// v1. A value it does not know is an error, never a guess.
func decide(ctx context.Context, in inputs) (Mode, error) {
	if in.Etcd {
		return Mode{Source: SourceEtcd}, nil
	}
	if in.Env != "" {
		g, err := parseGroup(in.Env)
		if err != nil {
			return Mode{}, fmt.Errorf("%s: %w", EnvGroup, err)
		}
		return Mode{Group: g, Source: SourceEnv}, nil
	}
	if in.Netconf != "" {
		g, err := parseGroup(in.Netconf)
		if err != nil {
			return Mode{}, fmt.Errorf("the calico plugin's calico_api_group in the CNI config: %w", err)
		}
		return Mode{Group: g, Source: SourceNetconf}, nil
	}
	served, err := in.Groups(ctx)
	if err != nil {
		return Mode{}, fmt.Errorf("deciding Calico's API group: listing the API server's groups (set %s to skip discovery): %w", EnvGroup, err)
	}
	if slices.Contains(served, "projectcalico.org") && !slices.Contains(served, "crd.projectcalico.org") {
		return Mode{Group: GroupV3, Source: SourceDiscovery}, nil
	}
	return Mode{Group: GroupV1, Source: SourceDiscovery}, nil
}

// parseGroup accepts a group with its version, or the bare group name.
func parseGroup(s string) (string, error) {
	switch strings.TrimSpace(s) {
	case GroupV1, "crd.projectcalico.org":
		return GroupV1, nil
	case GroupV3, "projectcalico.org":
		return GroupV3, nil
	}
	return "", fmt.Errorf("%q is not one of Calico's API groups (%s or %s)", s, GroupV3, GroupV1)
}
