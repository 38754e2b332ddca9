// Package config reads capo's configuration: Capo's CapoConfig file, accepted
// as is, plus capo's own optional keys. It is pure; the daemons watch the
// ConfigMap and keep the last good config when a new one is invalid.
package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"sigs.k8s.io/yaml"

	"github.com/capo-net/capo/pkg/owners"
	capsel "github.com/capo-net/capo/pkg/selection"
)

const (
	APIVersion = "config.capo.io/v1"
	Kind       = "CapoConfig"
	// ConfigMapKey is the key of the ConfigMap that holds the file.
	ConfigMapKey = "config.yaml"
)

// Config is the validated configuration in force.
type Config struct {
	IPReserveTime     time.Duration // a reservation older than this is released
	IPReserveMaxCount int           // more held than this cluster-wide: oldest released first
	IPReleasePeriod   time.Duration // how often the controller looks
	Selectors         []capsel.Selector
	ReserveTimeout    time.Duration // the agent's deadline for one reservation
	DeletedPodMemory  time.Duration // how long the agent remembers a deleted pod for late DELs
	ReturnAddress     ReturnMode    // whether a returning StatefulSet pod gets its reserved addresses back
	// OwnerKinds are further controllers with stable pod identities
	// (members named "<owner>-<ordinal>"), beside apps/v1's StatefulSet
	// and Kruise's, which capo-controller watches without being told.
	OwnerKinds []owners.Kind
}

// ReturnMode says where a StatefulSet pod that comes back gets the
// addresses capo holds for it.
type ReturnMode string

const (
	// ReturnSameNode: when it starts on the node that held them (the
	// addresses come from that node's blocks).
	ReturnSameNode ReturnMode = "sameNode"
	// ReturnAnyNode: also on another node, borrowing from the first
	// node's block, where Calico routes a borrowed address.
	ReturnAnyNode ReturnMode = "anyNode"
	// ReturnOff: never; the pod gets a fresh address, as Capo does.
	ReturnOff ReturnMode = "off"
)

// UnmarshalJSON takes YAML's reading of an unquoted off (false) as off, so
// "returnAddress: off" means what it says.
func (m *ReturnMode) UnmarshalJSON(b []byte) error {
	if string(b) == "false" {
		*m = ReturnOff
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("returnAddress must be %s, %s or %s", ReturnSameNode, ReturnAnyNode, ReturnOff)
	}
	*m = ReturnMode(s)
	return nil
}

// file is the on-disk form. Capo's controller-runtime keys are accepted and
// ignored, so a CapoConfig written for Capo loads unchanged.
type file struct {
	APIVersion        string                 `json:"apiVersion"`
	Kind              string                 `json:"kind"`
	IPReserveTime     *metav1.Duration       `json:"ipReserveTime,omitempty"`
	IPReserveMaxCount *int                   `json:"ipReserveMaxCount,omitempty"`
	IPReleasePeriod   *metav1.Duration       `json:"ipReleasePeriod,omitempty"`
	LabelSelector     *metav1.LabelSelector  `json:"labelSelector,omitempty"`
	PodSelectors      []metav1.LabelSelector `json:"podSelectors,omitempty"`
	ReserveTimeout    *metav1.Duration       `json:"reserveTimeout,omitempty"`
	DeletedPodMemory  *metav1.Duration       `json:"deletedPodMemory,omitempty"`
	ReturnAddress     *ReturnMode            `json:"returnAddress,omitempty"`
	OwnerKinds        []owners.Kind          `json:"ownerKinds,omitempty"`

	Health                     json.RawMessage `json:"health,omitempty"`
	Metrics                    json.RawMessage `json:"metrics,omitempty"`
	Webhook                    json.RawMessage `json:"webhook,omitempty"`
	LeaderElection             json.RawMessage `json:"leaderElection,omitempty"`
	SyncPeriod                 json.RawMessage `json:"syncPeriod,omitempty"`
	CacheNamespace             json.RawMessage `json:"cacheNamespace,omitempty"`
	GracefulShutDown           json.RawMessage `json:"gracefulShutDown,omitempty"`
	Controller                 json.RawMessage `json:"controller,omitempty"`
	Metadata                   json.RawMessage `json:"metadata,omitempty"`
	ControllerManagerConfigKey json.RawMessage `json:"controllerManagerConfigurationSpec,omitempty"`
}

// Default is Capo's shipped configuration.
func Default() *Config {
	c, err := Parse([]byte("apiVersion: " + APIVersion + "\nkind: " + Kind + "\n"))
	if err != nil {
		panic(err)
	}
	return c
}

// defaultSelectors are Capo's: StatefulSet pods and Kafka brokers.
var defaultSelectors = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
	{Key: "statefulset.kubernetes.io/pod-name", Operator: metav1.LabelSelectorOpExists},
	{Key: "brokerId", Operator: metav1.LabelSelectorOpExists},
}}

// Parse reads and validates a config file; unknown keys are errors so a typo
// does not silently fall back to a default.
func Parse(data []byte) (*Config, error) {
	var f file
	if err := yaml.UnmarshalStrict(data, &f); err != nil {
		return nil, fmt.Errorf("config is not a valid %s: %w", Kind, err)
	}
	if f.APIVersion != APIVersion || f.Kind != Kind {
		return nil, fmt.Errorf("config has apiVersion %q kind %q, want %s %s", f.APIVersion, f.Kind, APIVersion, Kind)
	}
	c := &Config{
		IPReserveTime:     dur(f.IPReserveTime, 40*time.Minute),
		IPReserveMaxCount: 300,
		IPReleasePeriod:   dur(f.IPReleasePeriod, 5*time.Second),
		ReserveTimeout:    dur(f.ReserveTimeout, 8*time.Second),
		DeletedPodMemory:  dur(f.DeletedPodMemory, 30*time.Minute),
		ReturnAddress:     ReturnSameNode,
		OwnerKinds:        f.OwnerKinds,
	}
	if f.ReturnAddress != nil {
		c.ReturnAddress = *f.ReturnAddress
	}
	if f.IPReserveMaxCount != nil {
		c.IPReserveMaxCount = *f.IPReserveMaxCount
	}
	ls := f.LabelSelector
	if ls == nil && len(f.PodSelectors) == 0 {
		ls = defaultSelectors
	}
	var err error
	if c.Selectors, err = selectors(ls, f.PodSelectors); err != nil {
		return nil, err
	}
	return c, c.validate()
}

func (c *Config) validate() error {
	var errs []error
	if c.IPReserveTime < time.Second {
		errs = append(errs, fmt.Errorf("ipReserveTime %s: must be at least 1s", c.IPReserveTime))
	}
	if c.IPReserveMaxCount < 1 {
		errs = append(errs, fmt.Errorf("ipReserveMaxCount %d: must be at least 1", c.IPReserveMaxCount))
	}
	if c.IPReleasePeriod < time.Second {
		errs = append(errs, fmt.Errorf("ipReleasePeriod %s: must be at least 1s", c.IPReleasePeriod))
	}
	if c.ReserveTimeout < 100*time.Millisecond || c.ReserveTimeout > time.Minute {
		errs = append(errs, fmt.Errorf("reserveTimeout %s: must be between 100ms and 1m", c.ReserveTimeout))
	}
	switch c.ReturnAddress {
	case ReturnSameNode, ReturnAnyNode, ReturnOff:
	default:
		errs = append(errs, fmt.Errorf("returnAddress %q: must be %s, %s or %s", c.ReturnAddress, ReturnSameNode, ReturnAnyNode, ReturnOff))
	}
	if c.DeletedPodMemory < time.Minute {
		errs = append(errs, fmt.Errorf("deletedPodMemory %s: must be at least 1m", c.DeletedPodMemory))
	}
	seen := map[string]bool{}
	for _, k := range c.OwnerKinds {
		if err := k.Validate(); err != nil {
			errs = append(errs, err)
		} else if seen[k.Key()] {
			errs = append(errs, fmt.Errorf("ownerKinds entry %s: listed twice (one object is served in every version of its group: list one)", k))
		}
		seen[k.Key()] = true
	}
	return errors.Join(errs...)
}

// selectors turns Capo's labelSelector (any single requirement matching
// selects, as Capo evaluates it) and capo's podSelectors (each a whole
// selector) into one list where any match selects.
func selectors(capo *metav1.LabelSelector, pods []metav1.LabelSelector) ([]capsel.Selector, error) {
	var out []capsel.Selector
	if capo != nil {
		for k, v := range capo.MatchLabels {
			r, err := labels.NewRequirement(k, selection.Equals, []string{v})
			if err != nil {
				return nil, fmt.Errorf("labelSelector.matchLabels %s=%s: %w", k, v, err)
			}
			out = append(out, capsel.Selector{Name: k + "=" + v, Selector: labels.NewSelector().Add(*r)})
		}
		for i, e := range capo.MatchExpressions {
			s, err := metav1.LabelSelectorAsSelector(&metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{e}})
			if err != nil {
				return nil, fmt.Errorf("labelSelector.matchExpressions[%d]: %w", i, err)
			}
			out = append(out, capsel.Selector{Name: describe(s), Selector: s})
		}
	}
	for i := range pods {
		s, err := metav1.LabelSelectorAsSelector(&pods[i])
		if err != nil {
			return nil, fmt.Errorf("podSelectors[%d]: %w", i, err)
		}
		if s.Empty() {
			return nil, fmt.Errorf("podSelectors[%d] is empty and would select every pod; use the pod annotation %s=%s instead", i, capsel.PodAnnotation, capsel.Enabled)
		}
		out = append(out, capsel.Selector{Name: describe(s), Selector: s})
	}
	return out, nil
}

func describe(s labels.Selector) string {
	str := s.String()
	if !strings.ContainsAny(str, "=!, ") {
		return str + " exists"
	}
	return "{" + str + "}"
}

func dur(d *metav1.Duration, def time.Duration) time.Duration {
	if d == nil {
		return def
	}
	return d.Duration
}
