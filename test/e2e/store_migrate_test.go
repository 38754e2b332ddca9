package e2e

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	apiv3 "github.com/projectcalico/api/pkg/apis/projectcalico/v3"
	"github.com/projectcalico/calico/libcalico-go/lib/clientv3"
	cerrors "github.com/projectcalico/calico/libcalico-go/lib/errors"
	"github.com/projectcalico/calico/libcalico-go/lib/options"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/capo-net/capo/pkg/reserve"
	"github.com/capo-net/capo/pkg/reserve/calicostore"
	"github.com/capo-net/capo/test/testbed"
)

// Objects of the per-node layout are read and released from until the
// controller's leader moves them into buckets, while an agent of that
// layout (a rolling update) keeps writing to its node's object: nothing it
// wrote is lost, entries keep their metadata and first timestamps, and in
// the end no per-node object is left.
func TestMigrationFromThePerNodeLayout(t *testing.T) {
	eachDatastore(t, func(t *testing.T, ds testbed.Datastore) {
		ctx := context.Background()
		env := bed.NewEnv(t, ds, testbed.EnvOptions{NoAgent: true})
		env.SetConfig(configWith("ipReserveTime: 1h\nipReserveMaxCount: 1000\n"))
		old := &oldAgent{c: newCalicoClient(t, ds), node: env.Node, namespace: env.Namespace, first: time.Now().Add(-10 * time.Minute).Truncate(time.Second)}
		for i := range 3 {
			if err := old.reserve(ctx, fmt.Sprintf("10.248.0.%d", i+1)); err != nil {
				t.Fatal(err)
			}
		}
		s := calicostore.New(env.Calico, reserve.DefaultLimits)
		if got := env.Reservations(); len(got) != 3 || got["10.248.0.1"].Pod != "old-10.248.0.1" || !got["10.248.0.1"].ReservedAt.Equal(old.first) {
			t.Fatalf("read before the migration: %+v", got)
		}
		if rel, err := s.Release(ctx, refsOf(env.Node, "10.248.0.3")); err != nil || len(rel) != 1 {
			t.Fatalf("release before the migration: %v %v", rel, err)
		}

		env.StartController("c1")
		journaled := 0
		for i := range 20 { // the old agent writes on through the migration
			ip := fmt.Sprintf("10.248.1.%d", i+1)
			for err := old.reserve(ctx, ip); err != nil; err = old.reserve(ctx, ip) {
				if !errors.Is(err, errRetiredForOldAgent) {
					t.Fatal(err)
				}
				journaled++ // what capo-ipam does when the agent fails: journal, replay
				time.Sleep(100 * time.Millisecond)
			}
			time.Sleep(150 * time.Millisecond)
		}
		want := append([]string{"10.248.0.1", "10.248.0.2"}, old.wrote[3:]...)
		eventually(t, 20*time.Second, "per-node objects migrated", func() bool {
			list, err := env.Calico.IPReservations().List(ctx, options.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range list.Items {
				if strings.HasPrefix(r.Name, calicostore.LegacyName(env.Node, 0)) {
					return false
				}
			}
			return true
		})
		got := env.Reservations()
		for _, ip := range want {
			if _, ok := got[ip]; !ok {
				t.Errorf("%s, written by the old agent, is not held", ip)
			}
		}
		if e := got["10.248.0.1"]; e.Pod != "old-10.248.0.1" || !e.ReservedAt.Equal(old.first) || e.OwnerName != "old" {
			t.Errorf("metadata or first timestamp changed: %+v", e)
		}
		t.Logf("%d held; the old agent journaled %d times while its object was retired", len(got), journaled)
	})
}

// errRetiredForOldAgent is what an agent of the per-node layout meets on a
// retired object: a format it does not know, an error; capo-ipam journals.
var errRetiredForOldAgent = errors.New("annotation in an unknown format")

// oldAgent writes as the agents of the per-node layout did: the node's
// object capo-<node>, read, added to, compare-and-swapped, in their format.
type oldAgent struct {
	c               clientv3.Interface
	node, namespace string
	first           time.Time
	wrote           []string
}

func (a *oldAgent) reserve(ctx context.Context, ip string) error {
	name := calicostore.LegacyName(a.node, 0)
	for {
		res, err := a.c.IPReservations().Get(ctx, name, options.GetOptions{})
		if errors.As(err, new(cerrors.ErrorResourceDoesNotExist)) {
			res, err = apiv3.NewIPReservation(), nil
			res.ObjectMeta = metav1.ObjectMeta{
				Name: name, Labels: map[string]string{calicostore.ManagedByLabel: calicostore.ManagedBy, calicostore.LegacyNodeKey: a.node},
				Annotations: map[string]string{calicostore.LegacyNodeKey: a.node},
			}
		}
		if err != nil {
			return err
		}
		ann := res.Annotations[calicostore.MetadataAnnotation]
		if ann != "" && !strings.HasPrefix(ann, "z1:") && !strings.HasPrefix(ann, "v1;") {
			return errRetiredForOldAgent
		}
		held, err := calicostore.Entries(res)
		if err != nil {
			return err
		}
		// Owned by a kind the controller does not judge: only the TTL (1h) could end it.
		held = append(held, reserve.Entry{
			IP: ip, Node: a.node, Namespace: a.namespace, Pod: "old-" + ip, PodUID: "u-" + ip, Reason: reserve.ReasonCNIDel,
			ReservedAt: a.first, OwnerKind: "Job", OwnerName: "old", OwnerUID: "o",
		})
		if err := calicostore.Rewrite(res, held); err != nil {
			return err
		}
		if res.ResourceVersion == "" {
			_, err = a.c.IPReservations().Create(ctx, res, options.SetOptions{})
		} else {
			_, err = a.c.IPReservations().Update(ctx, res, options.SetOptions{})
		}
		if errors.As(err, new(cerrors.ErrorResourceUpdateConflict)) || errors.As(err, new(cerrors.ErrorResourceAlreadyExists)) ||
			errors.As(err, new(cerrors.ErrorResourceDoesNotExist)) {
			continue
		}
		if err == nil {
			a.wrote = append(a.wrote, ip)
		}
		return err
	}
}
