// Package install puts capo-ipam into a node's CNI chain and takes it out
// again: the binary into the CNI bin directory, and the calico plugin's ipam
// block in the runtime's conflist wrapped as {"type": "capo-ipam",
// "delegate": <the original block>}. Nothing else in the file changes, and
// uninstalling gives back the original bytes.
package install

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/capo-net/capo/pkg/jsonedit"
)

// State is what a CNI config says about capo.
type State struct {
	IPAMPath  []any  // where the calico plugin's ipam block is
	IPAMType  string // calico-ipam, capo-ipam, or what else it is
	Installed bool
	// CalicoAPIGroup is the calico plugin's calico_api_group: Calico's CNI
	// plugins use it when CALICO_API_GROUP is not set, so capo does too.
	CalicoAPIGroup string
	Etcd           bool // the calico plugin uses the etcdv3 datastore
}

// Inspect finds the calico plugin's ipam block in a .conflist or a single
// .conf, and refuses what capo cannot handle safely.
func Inspect(conf []byte) (*State, error) {
	var top struct {
		Type    string            `json:"type"`
		Plugins []json.RawMessage `json:"plugins"`
	}
	if err := json.Unmarshal(conf, &top); err != nil {
		return nil, fmt.Errorf("cannot parse the CNI config (%v); leaving it untouched", err)
	}
	var base []any
	switch {
	case top.Plugins != nil:
		i := slices.IndexFunc(top.Plugins, func(p json.RawMessage) bool {
			var pl struct {
				Type string `json:"type"`
			}
			return json.Unmarshal(p, &pl) == nil && pl.Type == "calico"
		})
		if i < 0 {
			return nil, errors.New("no plugin of type calico in the CNI config: capo works only in Calico's CNI chain")
		}
		base = []any{"plugins", i}
	case top.Type == "calico":
	default:
		return nil, fmt.Errorf("the CNI config's plugin is %q, not calico: capo works only in Calico's CNI chain", top.Type)
	}
	st := &State{IPAMPath: append(base, "ipam")}
	if err := st.readCalicoKeys(conf, base); err != nil {
		return nil, err
	}
	s, e, err := jsonedit.Find(conf, st.IPAMPath...)
	if err != nil {
		return nil, fmt.Errorf("the calico plugin's ipam block: %w", err)
	}
	var ipam struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(conf[s:e], &ipam); err != nil {
		return nil, fmt.Errorf("the calico plugin's ipam block is not an object: %v", err)
	}
	st.IPAMType = ipam.Type
	switch ipam.Type {
	case "capo-ipam":
		st.Installed = true
	case "calico-ipam":
	default:
		return nil, fmt.Errorf("the calico plugin's ipam is %q, not calico-ipam: capo reserves Calico IPAM addresses and cannot serve this node (Canal and other host-local setups are not supported)", ipam.Type)
	}
	return st, nil
}

// Patch wraps the calico plugin's ipam block for capo-ipam, with extra
// capo-ipam settings (agent_socket, state_dir, ...) beside the delegate.
// Patching a patched config changes nothing.
func Patch(conf []byte, extra map[string]any) ([]byte, error) {
	st, err := Inspect(conf)
	if err != nil || st.Installed {
		return conf, err
	}
	s, e, _ := jsonedit.Find(conf, st.IPAMPath...)
	var b strings.Builder
	b.WriteString(`{"type": "capo-ipam", `)
	keys := make([]string, 0, len(extra))
	for k := range extra {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if k == "type" || k == "delegate" {
			return nil, fmt.Errorf("capo-ipam setting %q is reserved", k)
		}
		v, err := json.Marshal(extra[k])
		if err != nil {
			return nil, fmt.Errorf("capo-ipam setting %q: %w", k, err)
		}
		fmt.Fprintf(&b, "%q: %s, ", k, v)
	}
	b.WriteString(`"delegate": `)
	b.Write(conf[s:e])
	b.WriteString("}")
	return jsonedit.Replace(conf, s, e, []byte(b.String())), nil
}

// Unpatch puts the delegate block back where capo-ipam's was. A config
// without capo comes back unchanged.
func Unpatch(conf []byte) ([]byte, error) {
	st, err := Inspect(conf)
	if err != nil || !st.Installed {
		return conf, err
	}
	s, e, _ := jsonedit.Find(conf, st.IPAMPath...)
	original := []byte(`{"type": "calico-ipam"}`) // capo-ipam's default delegate
	if ds, de, err := jsonedit.Find(conf, append(st.IPAMPath, "delegate")...); err == nil {
		original = conf[ds:de]
	} else if !errors.Is(err, jsonedit.ErrNotFound) {
		return nil, err
	}
	return jsonedit.Replace(conf, s, e, original), nil
}

// readCalicoKeys reads the calico plugin's datastore keys capo's choice of
// Calico API group depends on.
func (st *State) readCalicoKeys(conf []byte, base []any) error {
	s, e := 0, len(conf)
	if len(base) > 0 {
		var err error
		if s, e, err = jsonedit.Find(conf, base...); err != nil {
			return fmt.Errorf("the calico plugin's config: %w", err)
		}
	}
	var pl struct {
		APIGroup      string `json:"calico_api_group"`
		DatastoreType string `json:"datastore_type"`
	}
	if err := json.Unmarshal(conf[s:e], &pl); err != nil {
		return fmt.Errorf("the calico plugin's config: %v", err)
	}
	st.CalicoAPIGroup = pl.APIGroup
	st.Etcd = pl.DatastoreType == "etcdv3" || pl.DatastoreType == "" // Calico's default
	return nil
}
