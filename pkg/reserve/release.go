package reserve

import (
	"context"
	"fmt"
	"slices"

	apiv3 "github.com/projectcalico/api/pkg/apis/projectcalico/v3"
	"github.com/projectcalico/calico/libcalico-go/lib/options"
)

// Release removes addresses from the node's objects and returns those that
// were held. It touches only reservations: an address still allocated in
// Calico IPAM stays allocated. An emptied last shard is deleted.
func (s *CalicoStore) Release(ctx context.Context, node string, ips []string) ([]string, error) {
	for attempt := 0; ; attempt++ {
		var objs []*object
		if attempt == 0 {
			objs = s.listedNode(node)
		}
		if objs == nil {
			var err error
			if objs, err = s.loadNode(ctx, node); err != nil {
				return nil, err
			}
		}
		var released []string
		for _, o := range objs {
			for _, ip := range ips {
				if _, ok := o.shard.entries[ip]; ok {
					delete(o.shard.entries, ip)
					o.drops = append(o.drops, ip)
					released = append(released, ip)
				}
			}
		}
		err := s.writeReleases(ctx, node, objs)
		if err == nil {
			slices.SortFunc(released, compareIP)
			return released, nil
		}
		if !retriable(err) || attempt >= maxAttempts {
			return nil, err
		}
		if err := backoff(ctx, attempt); err != nil {
			return nil, err
		}
	}
}

func (s *CalicoStore) writeReleases(ctx context.Context, node string, objs []*object) error {
	last := len(objs) - 1
	for i := last; i >= 0; i-- {
		o := objs[i]
		if !o.dirty() {
			continue
		}
		if i == last && i > 0 && len(o.shard.entries) == 0 {
			// Shards go from the end only, so loadNode never meets a gap.
			_, err := s.c.Delete(ctx, o.res.Name, options.DeleteOptions{ResourceVersion: o.res.ResourceVersion})
			if err != nil {
				return fmt.Errorf("deleting empty reservation %s: %w", o.res.Name, err)
			}
			last--
			continue
		}
		if err := s.write(ctx, node, objs[i:i+1], map[string]bool{}); err != nil {
			return err
		}
	}
	return nil
}

// List returns every address capo holds, on all nodes.
func (s *CalicoStore) List(ctx context.Context) ([]Entry, error) {
	list, err := s.c.List(ctx, options.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing reservations: %w", err)
	}
	var out []Entry
	listed := map[string]*apiv3.IPReservation{}
	defer func() {
		s.mu.Lock()
		s.listed = listed
		s.mu.Unlock()
	}()
	for i := range list.Items {
		res := &list.Items[i]
		if res.Labels[ManagedByLabel] != ManagedBy {
			continue
		}
		listed[res.Name] = res
		node := res.Annotations[NodeLabel] // the label may be shortened; the annotation is whole
		sh, err := decodeShard(node, res.Spec.ReservedCIDRs, res.Annotations[MetadataAnnotation])
		if err != nil {
			return nil, fmt.Errorf("reservation %s: %w", res.Name, err)
		}
		for _, e := range sh.entries {
			out = append(out, e)
		}
	}
	slices.SortFunc(out, func(a, b Entry) int { return compareIP(a.IP, b.IP) })
	return out, nil
}

// ListNode returns the addresses held for one node, reading only its objects.
func (s *CalicoStore) ListNode(ctx context.Context, node string) ([]Entry, error) {
	objs, err := s.loadNode(ctx, node)
	if err != nil {
		return nil, err
	}
	var out []Entry
	for _, o := range objs {
		for _, e := range o.shard.entries {
			out = append(out, e)
		}
	}
	slices.SortFunc(out, func(a, b Entry) int { return compareIP(a.IP, b.IP) })
	return out, nil
}
