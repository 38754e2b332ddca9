package controller

import (
	"sync"
	"time"

	"github.com/capo-net/capo/pkg/release"
	"github.com/capo-net/capo/pkg/reserve"
)

// releaser ends reservations: each pass (pass.go) reads them all, plans
// with the workloads' rules (ttl.go, the owners beyond apps/v1 in
// ownerwatch.go) and the releases asked by hand (requests.go), applies
// the plan, hands re-created StatefulSets their members' reservations
// (reown) and looks after the store (upkeep.go). It tells the operator,
// once each, of what it cannot read or will not apply.
type releaser struct {
	*deps
	owners *ownerWatches // owner kinds beyond apps/v1 (nil: none watched)

	mu            sync.Mutex
	unreadable    map[string]string              // reservation objects reported unreadable, and why
	badTTLs       map[string]string              // invalid reservation time annotations reported: object -> value
	recreatable   map[release.OwnerKey]time.Time // StatefulSets last seen opting in to keep members across a re-creation
	legacyWarned  map[string]string              // nodes told their release annotation is not read, and its value
	unwatchedTold map[reserve.Ref]string         // reservations told their owner's kind is not watched, and why
	observed      map[request]time.Time          // release requests, when this replica's watch first showed each
	stampDue      chan struct{}                  // the release ConfigMap changed: its stamps to write (stampLoop)

	poolsAt      time.Time             // the last read of Calico's pool utilization (pass goroutine only)
	requestsSeen map[request]time.Time // releases by hand answered, and when first seen (pass goroutine only)
	heldTold     map[string]string     // releases held back, as last told, by owner, reason and why (pass goroutine only)
}

func newReleaser(d *deps, oc OwnerClients) *releaser {
	return &releaser{deps: d, owners: newOwnerWatches(oc), legacyWarned: map[string]string{}, observed: map[request]time.Time{}, stampDue: make(chan struct{}, 1)}
}
