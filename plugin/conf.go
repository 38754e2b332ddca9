package plugin

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/capo-net/capo/pkg/journal"
	"github.com/capo-net/capo/pkg/jsonedit"
	"github.com/capo-net/capo/pkg/wire"
)

// PluginType is the ipam type that selects capo-ipam in a Calico netconf.
const PluginType = "capo-ipam"

// DefaultDelegate is used when the ipam block names no delegate: capo-ipam
// replaced calico-ipam, which takes all its settings from the top level.
var DefaultDelegate = json.RawMessage(`{"type":"calico-ipam"}`)

// DefaultDelegateTimeout outlasts calico-ipam's own 90 s datastore budget, so a
// healthy but slow call is never cut short, and stays under the kubelet's
// two-minute runtime request timeout.
const DefaultDelegateTimeout = 100 * time.Second

// NetConf is the netconf Calico hands to its IPAM plugin. The raw bytes are
// kept so the delegate receives every other key exactly as Calico wrote it.
type NetConf struct {
	Name       string
	CNIVersion string
	IPAM       IPAMConf
	// CalicoAPIGroup is the calico plugin's calico_api_group: the group
	// calico-ipam reads and writes Calico's resources in, when set.
	CalicoAPIGroup string

	calico             calicoSettings
	raw                []byte
	ipamStart, ipamEnd int // byte span of the top-level "ipam" value in raw
}

// IPAMConf is capo-ipam's own block. Every key not listed here belongs to the
// delegate and must be inside "delegate".
type IPAMConf struct {
	Type            string          `json:"type"`
	Delegate        json.RawMessage `json:"delegate,omitempty"`
	DelegateTimeout Duration        `json:"delegate_timeout,omitempty"`
	LogLevel        string          `json:"log_level,omitempty"`
	LogFile         string          `json:"log_file,omitempty"`
	AgentSocket     string          `json:"agent_socket,omitempty"`
	AgentTimeout    Duration        `json:"agent_timeout,omitempty"`
	StateDir        string          `json:"state_dir,omitempty"`
	// UninstalledAfter is how long the node's last agent pod must be gone,
	// from a node no longer opted in, before capo-ipam takes capo as
	// uninstalled (gone.go).
	UninstalledAfter Duration `json:"uninstalled_after,omitempty"`

	delegateType string
}

// knownIPAMKeys are the keys of IPAMConf; anything else in the ipam block was
// most likely meant for the delegate.
var knownIPAMKeys = map[string]bool{
	"type": true, "delegate": true, "delegate_timeout": true, "log_level": true, "log_file": true,
	"agent_socket": true, "agent_timeout": true, "state_dir": true, "uninstalled_after": true,
}

// DefaultAgentTimeout is how long a DEL waits for the agent before it
// journals the release instead: short against the runtime's patience, long
// against one datastore write.
const DefaultAgentTimeout = 10 * time.Second

// ParseNetConf reads stdin. Errors say what is wrong and how to fix it.
func ParseNetConf(stdin []byte) (*NetConf, error) {
	conf := &NetConf{raw: stdin}
	if err := conf.locateIPAM(); err != nil {
		return nil, err
	}
	var top struct {
		Name       string          `json:"name"`
		CNIVersion string          `json:"cniVersion"`
		Kubernetes json.RawMessage `json:"kubernetes"`
		Policy     json.RawMessage `json:"policy"`
		APIGroup   string          `json:"calico_api_group"`
	}
	if err := json.Unmarshal(stdin, &top); err != nil {
		return nil, fmt.Errorf("netconf on stdin is not valid JSON: %w", err)
	}
	conf.Name, conf.CNIVersion, conf.CalicoAPIGroup = top.Name, top.CNIVersion, top.APIGroup
	conf.calico = calicoSettingsOf(top.Kubernetes, top.Policy)
	if err := conf.parseIPAM(stdin[conf.ipamStart:conf.ipamEnd]); err != nil {
		return nil, err
	}
	return conf, nil
}

// locateIPAM finds the byte span of the top-level "ipam" value.
func (c *NetConf) locateIPAM() error {
	var err error
	c.ipamStart, c.ipamEnd, err = jsonedit.Find(c.raw, "ipam")
	switch {
	case err == nil:
		return nil
	case errors.Is(err, jsonedit.ErrInvalid):
		return fmt.Errorf("netconf on stdin is %w", err)
	case errors.Is(err, jsonedit.ErrWrongKind):
		return errors.New("netconf on stdin is not a JSON object")
	case errors.Is(err, jsonedit.ErrDuplicateKey):
		return errors.New(`netconf has more than one "ipam" key; keep one`)
	case errors.Is(err, jsonedit.ErrNotFound):
		return errors.New(`netconf has no "ipam" block; capo-ipam must be called as the ipam plugin of the calico plugin`)
	}
	return fmt.Errorf("netconf on stdin: %w", err)
}

func (c *NetConf) parseIPAM(block []byte) error {
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(block, &keys); err != nil {
		return fmt.Errorf(`netconf "ipam" is not a JSON object: %w`, err)
	}
	if err := json.Unmarshal(block, &c.IPAM); err != nil {
		return fmt.Errorf(`netconf "ipam" block is malformed: %w`, err)
	}
	var stray []string
	for k := range keys {
		if !knownIPAMKeys[k] {
			stray = append(stray, k)
		}
	}
	slices.Sort(stray)
	if len(c.IPAM.Delegate) == 0 || string(c.IPAM.Delegate) == "null" {
		if len(stray) > 0 {
			return fmt.Errorf(`ipam has settings capo-ipam does not own (%s) and no "delegate" block: move the original ipam block, with those settings, into ipam.delegate`, strings.Join(stray, ", "))
		}
		c.IPAM.Delegate = DefaultDelegate
	} else if len(stray) > 0 {
		return fmt.Errorf(`ipam has unknown keys (%s) beside "delegate": settings for the delegate belong inside ipam.delegate`, strings.Join(stray, ", "))
	}
	t, err := delegateTypeOf(c.IPAM.Delegate)
	if err != nil {
		return err
	}
	c.IPAM.delegateType = t
	c.IPAM.setDefaults()
	return nil
}

// delegateTypeOf is the delegate block's plugin type, which must name
// another plugin than capo-ipam, by name.
func delegateTypeOf(delegate json.RawMessage) (string, error) {
	var d struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(delegate, &d); err != nil {
		return "", fmt.Errorf(`ipam.delegate must be a JSON object with a "type", like {"type": "calico-ipam"}: %w`, err)
	}
	switch d.Type {
	case "":
		return "", errors.New(`ipam.delegate has no "type"; give the original ipam block, like {"type": "calico-ipam"}`)
	case PluginType:
		return "", errors.New(`ipam.delegate is capo-ipam itself; it must be the original ipam block, like {"type": "calico-ipam"}`)
	}
	if strings.ContainsAny(d.Type, `/\`) {
		return "", fmt.Errorf("ipam.delegate type %q must be a plugin name, not a path", d.Type)
	}
	return d.Type, nil
}

// setDefaults fills what the ipam block leaves out.
func (c *IPAMConf) setDefaults() {
	if c.UninstalledAfter <= 0 {
		c.UninstalledAfter = Duration(goneAfter)
	}
	if c.DelegateTimeout <= 0 {
		c.DelegateTimeout = Duration(DefaultDelegateTimeout)
	}
	if c.AgentTimeout <= 0 {
		c.AgentTimeout = Duration(DefaultAgentTimeout)
	}
	if c.AgentSocket == "" {
		c.AgentSocket = wire.DefaultSocket
	}
	if c.StateDir == "" {
		c.StateDir = journal.DefaultStateDir
	}
}

// DelegateType is the plugin name of the delegate, e.g. "calico-ipam".
func (c *NetConf) DelegateType() string { return c.IPAM.delegateType }

// DelegateNetConf is the netconf the delegate receives: the original bytes
// with the ipam value replaced by the delegate block, every other key intact.
func (c *NetConf) DelegateNetConf() []byte {
	return jsonedit.Replace(c.raw, c.ipamStart, c.ipamEnd, c.IPAM.Delegate)
}

// Raw is the netconf exactly as it arrived on stdin.
func (c *NetConf) Raw() []byte { return c.raw }

// calicoSettings are the calico plugin's own keys that decide whether and
// how it reads the pod: its kubeconfig, and its policy type (it reads pods,
// and so their IPAM annotations, only with policy type "k8s").
type calicoSettings struct {
	Kubernetes struct {
		Kubeconfig string `json:"kubeconfig"`
	}
	Policy struct {
		Type string `json:"type"`
	}
}

// calicoSettingsOf decodes the two blocks as the calico plugin reads them,
// each on its own: a key of an unexpected type leaves its setting empty
// and fails nothing, since these keys are the calico plugin's to check.
func calicoSettingsOf(kubernetes, policy json.RawMessage) calicoSettings {
	var s calicoSettings
	if len(kubernetes) > 0 {
		_ = json.Unmarshal(kubernetes, &s.Kubernetes)
	}
	if len(policy) > 0 {
		_ = json.Unmarshal(policy, &s.Policy)
	}
	return s
}
