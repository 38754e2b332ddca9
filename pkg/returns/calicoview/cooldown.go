package calicoview

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"
)

// Calico 3.33 adds IPAMConfiguration ipCooldownSeconds: a released address
// stays in its block, marked released (releasedAt) and pointing at no
// handle, until it has cooled that long, and calico-ipam refuses to assign
// it meanwhile. The Calico
// client capo is built on predates the field, so it is read from the API
// as stored: the Kubernetes datastore's IPAMConfig (crd.projectcalico.org)
// and, where served, projectcalico.org/v3's IPAMConfiguration. With the
// etcdv3 datastore neither exists and the cooldown reads as zero.
var cooldownPaths = []string{
	"/apis/crd.projectcalico.org/v1/ipamconfigs/default",
	"/apis/projectcalico.org/v3/ipamconfigurations/default",
}

// ReadCooldown is Calico's IP cooldown as configured, 0 when unset or where
// the API does not have it.
func ReadCooldown(ctx context.Context, rc rest.Interface) (time.Duration, error) {
	var longest time.Duration
	for _, path := range cooldownPaths {
		raw, err := rc.Get().AbsPath(path).DoRaw(ctx)
		switch {
		case apierrors.IsNotFound(err), apierrors.IsForbidden(err):
			continue // not served here, or not readable: nothing said
		case err != nil:
			return 0, fmt.Errorf("reading %s: %w", path, err)
		}
		d, err := parseCooldown(raw)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", path, err)
		}
		longest = max(longest, d)
	}
	return longest, nil
}

func parseCooldown(raw []byte) (time.Duration, error) {
	var obj struct {
		Spec struct {
			IPCooldownSeconds *int64 `json:"ipCooldownSeconds"`
		} `json:"spec"`
	}
	if err := json.Unmarshal(raw, &obj); err != nil {
		return 0, fmt.Errorf("decoding: %w", err)
	}
	if obj.Spec.IPCooldownSeconds == nil || *obj.Spec.IPCooldownSeconds < 0 {
		return 0, nil
	}
	return time.Duration(*obj.Spec.IPCooldownSeconds) * time.Second, nil
}

// Cooldown caches ReadCooldown for Every: a returning pod's ADD reads it at
// most that often.
type Cooldown struct {
	REST  rest.Interface // nil: no cooldown is read (tests, etcd-only tools)
	Every time.Duration

	mu   sync.Mutex
	at   time.Time
	last time.Duration
}

// Get is the cooldown as last read, read again when older than Every. A
// failed read keeps the last value: it only words a refusal.
func (c *Cooldown) Get(ctx context.Context, now time.Time) (time.Duration, error) {
	if c == nil || c.REST == nil {
		return 0, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.at.IsZero() && now.Sub(c.at) < c.Every {
		return c.last, nil
	}
	d, err := ReadCooldown(ctx, c.REST)
	if err != nil {
		return c.last, err
	}
	c.at, c.last = now, d
	return d, nil
}

// Last is the value last read, without reading.
func (c *Cooldown) Last() time.Duration {
	if c == nil {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.last
}
