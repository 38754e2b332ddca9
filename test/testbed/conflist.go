package testbed

import (
	"encoding/json"
	"path/filepath"
)

// IPAM selects what the calico plugin calls for addresses.
type IPAM string

const (
	PlainCalico IPAM = "calico-ipam" // Calico as shipped
	Capo        IPAM = "capo-ipam"   // capo-ipam delegating to calico-ipam
)

// NetworkName is the conflist name; Calico's IPAM handle is <name>.<container id>.
const NetworkName = "k8s-pod-network"

// Conflist renders Calico's own conflist (as calico-node's install-cni writes
// it, cniVersion 0.3.1) for this env's node, with ipam set by mode. Host
// paths the plugin writes to are moved under the env's dir.
func (e *Env) Conflist(mode IPAM) []byte {
	return e.ConflistWith(mode, nil)
}

// ConflistWith is Conflist with extra keys merged into the calico plugin.
func (e *Env) ConflistWith(mode IPAM, extra map[string]any) []byte {
	calico := map[string]any{
		"type":                "calico",
		"log_level":           "info",
		"log_file_path":       filepath.Join(e.Dir, "calico-cni.log"),
		"ipam_lock_file":      filepath.Join(e.Bed.Dir, "ipam.lock"),
		"endpoint_status_dir": filepath.Join(e.Dir, "endpoint-status"),
		"nodename":            e.Node,
		"nodename_file":       filepath.Join(e.Dir, "nodename"),
		"mtu":                 1450,
		"policy":              map[string]any{"type": "k8s"},
		"kubernetes":          map[string]any{"kubeconfig": e.Bed.Kubeconfig},
	}
	switch e.DS {
	case Kubernetes:
		calico["datastore_type"] = "kubernetes"
		if e.nativeV3() {
			// As install-cni writes it (CALICO_API_GROUP): told, calico
			// does not discover the group, which an API server out of
			// reach would answer as crd.projectcalico.org/v1.
			calico["calico_api_group"] = "projectcalico.org/v3"
		}
	case Etcd:
		calico["etcd_endpoints"] = e.Bed.EtcdURL
	}
	ipam := map[string]any{"type": "calico-ipam"}
	if e.Pool6 != nil {
		ipam["assign_ipv6"] = "true"
	}
	switch mode {
	case Capo:
		calico["ipam"] = map[string]any{
			"type":         "capo-ipam",
			"delegate":     ipam,
			"agent_socket": e.AgentSocket(),
			"state_dir":    e.StateDir(),
			"log_file":     filepath.Join(e.Dir, "capo-ipam.log"),
		}
	default:
		calico["ipam"] = ipam
	}
	for k, v := range extra {
		calico[k] = v
	}
	b, _ := json.Marshal(map[string]any{
		"name":       NetworkName,
		"cniVersion": "0.3.1",
		"plugins":    []any{calico},
	})
	return b
}
