package controller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	corev1 "k8s.io/api/core/v1"

	"github.com/capo-net/capo/pkg/reserve"
	"github.com/capo-net/capo/pkg/reserve/calicostore"
)

// upkeep follows each pass. It stamps the entries this controller sees for
// the first time with its own clock (Seen), so that one clock judges every
// entry's age whatever the agents' clocks say; and it tidies the store:
// entries still in the per-node layout move into buckets, and objects a
// writer left empty or half-deleted go.
func (rel *releaser) upkeep(ctx context.Context, entries []reserve.Entry, released map[reserve.Ref]bool) error {
	var unseen []reserve.Ref
	for _, e := range entries {
		if e.Seen.IsZero() && !released[e.Ref()] {
			unseen = append(unseen, e.Ref())
		}
	}
	var errs []error
	if len(unseen) > 0 {
		if err := rel.store.Stamp(ctx, unseen, rel.now()); err != nil {
			errs = append(errs, fmt.Errorf("stamping %d new reservations: %w", len(unseen), err))
		}
	}
	t, err := rel.store.Tidy(ctx)
	if err != nil {
		errs = append(errs, fmt.Errorf("tidying the reservation objects: %w", err))
	}
	if t != nil {
		rel.metrics.migrated.Add(float64(t.Migrated))
		if t.Migrated+t.Deleted+t.Relisted > 0 {
			slog.Info("tidied the reservation objects", "migrated", t.Migrated, "deleted", t.Deleted, "relisted", t.Relisted)
		}
	}
	return errors.Join(errs...)
}

// reportUnreadable publishes the capo objects List skipped, and tells of
// each once (per content) with a Warning Event: its addresses stay
// reserved, but nothing capo does touches them until an operator fixes it.
func (rel *releaser) reportUnreadable(objs []reserve.Unreadable) {
	rel.metrics.unreadable.Set(float64(len(objs)))
	rel.mu.Lock()
	defer rel.mu.Unlock()
	seen := map[string]string{}
	for _, u := range objs {
		why := u.Err.Error()
		seen[u.Object] = why
		if rel.unreadable[u.Object] == why {
			continue
		}
		slog.Error("a reservation object does not decode; its addresses stay reserved and untouched until it is fixed or deleted",
			"object", u.Object, "addresses", u.Addresses, "err", u.Err)
		ref := &corev1.ObjectReference{Kind: "IPReservation", APIVersion: "projectcalico.org/v3", Name: u.Object}
		rel.recorder.Eventf(ref, corev1.EventTypeWarning, "UnreadableReservation",
			"capo cannot read %s (%s); its %d addresses stay reserved and are never released by capo: fix or delete the annotation named (capo's own is %s)",
			u.Object, why, u.Addresses, calicostore.MetadataAnnotation)
	}
	rel.unreadable = seen
}
