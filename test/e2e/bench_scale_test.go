package e2e

import (
	"context"
	"fmt"
	"hash/fnv"
	"testing"
	"time"

	apiv3 "github.com/projectcalico/api/pkg/apis/projectcalico/v3"
	"github.com/projectcalico/calico/libcalico-go/lib/clientv3"
	"github.com/projectcalico/calico/libcalico-go/lib/options"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/capo-net/capo/pkg/reserve"
	"github.com/capo-net/capo/pkg/reserve/calicostore"
	"github.com/capo-net/capo/pkg/reserve/reservetest"
	"github.com/capo-net/capo/test/testbed"
)

// BenchmarkADDAtScale measures calico-ipam's ADD against none held, at the
// scale points of issue 14, and the parts of the cost, each point with its
// own baseline in the same run:
//
//	300/buckets        300 held over 300 nodes, as the store lays them out
//	300/bare           the same objects without capo's metadata
//	300/one-object     the same entries in one object: what 16 objects cost
//	300/per-node       the same in the per-node layout: 300 objects
//	10k/buckets        10 000 held over 1 000 nodes whose objects have held
//	                   and released reservations before
//	10k/bare           the same objects without capo's metadata: Calico's
//	                   own cost of 10 000 reserved addresses
//	10k/64-objects     the same entries in about 64 objects: what the
//	                   object count costs
func BenchmarkADDAtScale(b *testing.B) {
	for _, ds := range testbed.Datastores {
		b.Run(string(ds)+"/300", func(b *testing.B) {
			env := bed.NewEnv(b, ds, testbed.EnvOptions{PoolPrefix: 24, NoAgent: true})
			buckets := inMemory(b, reserve.DefaultLimits, 300, 1)
			timeAgainstNone(b, env, []*holdState{
				{name: "buckets", setup: recreate(b, env.Calico, buckets)},
				{name: "bare", setup: recreate(b, env.Calico, stripMetadata(buckets))},
				{name: "one-object", setup: recreate(b, env.Calico, oneObject(b, buckets))},
				{name: "per-node", setup: recreate(b, env.Calico, perNodeObjects(b, 300, 1))},
			})
		})
		b.Run(string(ds)+"/10k", func(b *testing.B) {
			env := bed.NewEnv(b, ds, testbed.EnvOptions{PoolPrefix: 24, NoAgent: true})
			left := churn(b, env.Calico, 1000)
			tenK := snapshot(b, env.Calico, func(s reserve.Store) { hold(b, s, 1000, 10) }, calicostore.New(env.Calico, reserve.DefaultLimits))
			defer func() { // after the timer's reset, which drops reported metrics
				b.ReportMetric(float64(left), "objects-after-churn")
				b.ReportMetric(float64(len(tenK)), "objects")
			}()
			timeAgainstNone(b, env, []*holdState{
				{name: "buckets", setup: recreate(b, env.Calico, tenK)},
				{name: "bare", setup: recreate(b, env.Calico, stripMetadata(tenK))},
				{name: "64-objects", setup: recreate(b, env.Calico, inMemory(b, reserve.Limits{MaxIPs: 160, MaxAnnotationBytes: 160 << 10}, 1000, 10))},
			})
		})
	}
}

// timeAgainstNone times the states and none, interleaved, and reports each
// against none.
func timeAgainstNone(b *testing.B, env *testbed.Env, states []*holdState) {
	none := &holdState{name: "none"}
	timeADDs(b, env, append([]*holdState{none}, states...))
	for _, st := range states {
		report(b, "none", none.took, st.name, st.took)
	}
}

// churn reserves one address for each of n nodes through the store, then
// releases them all, and returns how many objects are left.
func churn(b *testing.B, c clientv3.Interface, n int) int {
	ctx := context.Background()
	s := calicostore.New(c, reserve.DefaultLimits)
	hold(b, s, n, 1)
	l, err := s.List(ctx)
	if err != nil {
		b.Fatal(err)
	}
	var refs []reserve.Ref
	for _, e := range l.Entries {
		refs = append(refs, e.Ref())
	}
	if _, err := s.Release(ctx, refs); err != nil {
		b.Fatal(err)
	}
	list, err := c.IPReservations().List(ctx, options.ListOptions{})
	if err != nil {
		b.Fatal(err)
	}
	return len(list.Items)
}

// hold reserves perNode addresses for each of n nodes.
func hold(b *testing.B, s reserve.Store, n, perNode int) {
	now := time.Now()
	for node := range n {
		var es []reserve.Entry
		for i := range perNode {
			es = append(es, benchEntry(node*perNode+i, now))
		}
		if _, err := s.Reserve(context.Background(), fmt.Sprintf("bench-node-%d", node), es); err != nil {
			b.Fatal(err)
		}
	}
}

// snapshot runs fill on s and returns the objects it wrote to c.
func snapshot(b *testing.B, c clientv3.Interface, fill func(reserve.Store), s reserve.Store) []apiv3.IPReservation {
	fill(s)
	list, err := c.IPReservations().List(context.Background(), options.ListOptions{})
	if err != nil {
		b.Fatal(err)
	}
	out := list.Items
	for i := range out {
		out[i].ObjectMeta = metav1.ObjectMeta{Name: out[i].Name, Labels: out[i].Labels, Annotations: out[i].Annotations}
	}
	return out
}

// inMemory is what the store writes for n nodes of perNode addresses,
// made in memory.
func inMemory(b *testing.B, l reserve.Limits, n, perNode int) []apiv3.IPReservation {
	s := reservetest.NewStore(l)
	hold(b, s, n, perNode)
	var out []apiv3.IPReservation
	for _, name := range s.Objects.Names() {
		o, _ := s.Objects.Object(name)
		out = append(out, toReservation(o))
	}
	return out
}

// perNodeObjects is what the per-node layout wrote: one object per node.
func perNodeObjects(b *testing.B, n, perNode int) []apiv3.IPReservation {
	var out []apiv3.IPReservation
	now := time.Now()
	for node := range n {
		name := fmt.Sprintf("bench-node-%d", node)
		var es []reserve.Entry
		for i := range perNode {
			es = append(es, benchEntry(node*perNode+i, now))
		}
		// Written in the format the per-node layout's agents wrote.
		res := apiv3.NewIPReservation()
		res.ObjectMeta = metav1.ObjectMeta{
			Name: calicostore.LegacyName(name, 0), Labels: map[string]string{calicostore.ManagedByLabel: calicostore.ManagedBy, calicostore.LegacyNodeKey: name},
			Annotations: map[string]string{calicostore.LegacyNodeKey: name},
		}
		if err := calicostore.Rewrite(res, es); err != nil {
			b.Fatal(err)
		}
		out = append(out, *res)
	}
	return out
}

// oneObject is the entries of objs in one bucket object.
func oneObject(b *testing.B, objs []apiv3.IPReservation) []apiv3.IPReservation {
	return regroup(b, objs, 1)
}

// regroup spreads the entries of objs over k objects, by node: what k
// buckets would hold.
func regroup(b *testing.B, objs []apiv3.IPReservation, k int) []apiv3.IPReservation {
	groups := make([][]reserve.Entry, k)
	for _, o := range objs {
		es, err := calicostore.Entries(&o)
		if err != nil {
			b.Fatal(err)
		}
		for _, e := range es {
			h := fnv.New32a()
			h.Write([]byte(e.Node))
			groups[h.Sum32()%uint32(k)] = append(groups[h.Sum32()%uint32(k)], e)
		}
	}
	var out []apiv3.IPReservation
	for i, g := range groups {
		if len(g) == 0 {
			continue
		}
		res := apiv3.NewIPReservation()
		res.Name = calicostore.BucketName(0, i)
		if err := calicostore.Rewrite(res, g); err != nil {
			b.Fatal(err)
		}
		out = append(out, *res)
	}
	return out
}

func stripMetadata(objs []apiv3.IPReservation) []apiv3.IPReservation {
	out := make([]apiv3.IPReservation, len(objs))
	for i, o := range objs {
		out[i] = *o.DeepCopy()
		out[i].Annotations = nil
	}
	return out
}

func toReservation(o reservetest.Object) apiv3.IPReservation {
	r := apiv3.NewIPReservation()
	r.ObjectMeta = metav1.ObjectMeta{Name: o.Name, Labels: o.Labels, Annotations: o.Annotations}
	r.Spec.ReservedCIDRs = o.CIDRs
	return *r
}

// recreate is a state's setup: create the objects in c.
func recreate(b *testing.B, c clientv3.Interface, objs []apiv3.IPReservation) func() {
	return func() {
		for i := range objs {
			if _, err := c.IPReservations().Create(context.Background(), objs[i].DeepCopy(), options.SetOptions{}); err != nil {
				b.Fatal(err)
			}
		}
	}
}
